// Package usage is the error of bad usage or bad input: a flag, argument, file or override the user
// gave that cannot work. The temper binary prints it with the command's name and exits with code 2
// (other failures exit with 1), so that a library below cmd (benchmarks, pipelines, model directories)
// can refuse its input without knowing about exit codes. Its message names the flag or field at fault.
//
// Standard library only, so that any package may return it.
package usage
