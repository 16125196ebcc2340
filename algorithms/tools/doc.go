// Package tools is the registry of tools an agentic policy may call inside an episode, and the
// call format those calls take in the policy's text.
//
// A tool has a name, a JSON Schema for its arguments (checked before every call: a bad call returns
// an error result naming the tool and the failing argument, never a panic), a timeout, and a Go
// function. A call is written by the policy as one tagged JSON object,
//
//	<tool>{"name": "calc", "arguments": {"expr": "48213*9071"}}</tool>
//
// and its result goes back to the policy as a tool message. Built-ins: calc (exact big-number
// arithmetic), lookup (key → value over a corpus the caller loads) and check (the task's own
// verifier, so a policy can test an answer and retry) and python (a program's output; the caller
// supplies the sandbox that runs it). Tools marked LongRunning run as their own activity on the
// `tools` task queue when the caller supplies Env.Remote (the activities layer does); here they run
// like any other. Pure Go: no Temporal, no storage, no I/O.
package tools
