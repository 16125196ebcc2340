// Package workers wires processes: roles to task queues to registrations, and the embedded dev stack
// (a real Temporal server with a SQLite file and the Web UI, in-process, plus workers for every role).
// It is the only layer besides cmd that may import everything.
package workers
