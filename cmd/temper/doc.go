// Command temper is Temper's one binary: the embedded dev stack, workers, and the client commands that
// start and follow pipelines. `temper help` lists the commands; each takes -h.
//
// Layout: each command is one file, cmd_NAME.go, holding its flag struct (bind declares the flags)
// and its run function, registered into the commands table by name; subcommands (`temper data gen`)
// are listed in the table too. What several commands share: flags.go (the client, start and worker
// flags), stack.go and devstate.go (the embedded stack of dev, server and demo, and the dev.json that
// lets clients find it). The logic lives below, in libraries with their own tests: internal/bench (the
// benchmarks and their flags), internal/report (the views of runs: status, progress, lists, samples,
// scores, the report page), internal/pipeline (reading, checking, forking, starting and steering
// pipelines), internal/datagen (`data gen`), internal/modeldir (`model inspect`, `model init`) and
// internal/serve.
//
// Bad usage or input exits with code 2 (a *usage.Error from whichever package refused it), other
// failures with 1.
package main
