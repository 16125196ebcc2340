// Command temper is Temper's one binary: the embedded dev stack, workers, and the client commands that
// start and follow pipelines. `temper help` lists the commands; each takes -h.
//
// Layout: each command is one file, cmd_NAME.go, holding its flag struct (bind declares the flags)
// and its run function, registered into the commands table by name; subcommands (`temper data gen`)
// are listed in the table too. What several commands share: flags.go (the client flags and flag
// helpers), pipeline.go (reading, checking and starting a pipeline), stack.go and devstate.go (the
// embedded stack of dev, server and demo, and the dev.json that lets clients find it). Benchmarks live
// in internal/bench and the views of runs (status, progress, lists, samples, the report page) in
// internal/report.
//
// Bad usage or input exits with code 2, other failures with 1.
package main
