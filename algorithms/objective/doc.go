// Package objective defines training objectives as GoMLX graph builders over a model and one step's
// batch, so that any loss of algorithms/loss can be trained by the runtime (tpu.Runtime.StepObjective)
// without the runtime knowing about it.
//
// Each objective owns its batch type (PolicyBatch, PPOBatch, PrefBatch, KTOBatch, BTBatch, Sequences,
// DistillBatch): plain host fields that the batch lays out as tensors in the order its objective's
// Build reads them, both written in batch.go. Trainers fill a batch's fields and hand it to the engine
// whole; nothing outside this package indexes an objective's inputs by position. Two objectives that
// build different graphs have different names, which key the runtime's compiled executables together
// with the batch's shapes.
//
// Build functions are graph code: they panic on a batch of the wrong kind or shape, and the runtime
// turns the panic into an error.
package objective
