// Package trainapi is the trainer role's side of the contract with workflows: the registered
// activity names (train.*), their input and output structs, the data, batch and optimizer specs
// they carry, and the checkpoint file names. It imports no GoMLX and no storage client, so
// workflows import it instead of the trainer packages; the JSON field names are part of the
// contract (histories of runs in flight hold them) and must not change.
package trainapi
