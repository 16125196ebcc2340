// Package tpu is Temper's accelerator runtime: it picks a GoMLX backend, owns one model's weights
// (and, once training starts, its AdamW state) in a GoMLX store, compiles graphs once per padded
// shape bucket, and accounts FLOPs and model FLOP utilisation (MFU).
//
// Contract:
//   - Backends: "go" (default; pure Go, executor "sequential" by default or "parallel") and "xla"
//     (chosen by setting a PJRT plugin: cpu, cuda, tpu or a plugin path). A backend that is not
//     linked into the binary or a plugin that is not installed is an error naming what is
//     missing, never a panic.
//   - Shapes: batch and sequence are padded up to buckets (batch: powers of two; sequence: powers
//     of two to 32, then multiples of 32; or configured lists), so
//     varied inputs reuse a few executables; the cache is keyed by (graph, bucket) and counts hits,
//     misses and compile time. Padding is exact: padded rows and columns carry loss weight 0 and
//     sit after the real tokens of a causal model, so results equal the unpadded computation up to
//     float summation order.
//   - Errors: every exported method that runs GoMLX recovers panics into errors naming the
//     operation. Each execution runs under a watchdog (Options.ExecTimeout); an execution that
//     overruns returns an error wrapping ErrStuck and leaves the Runtime unusable (the stuck
//     goroutine cannot be stopped): build a new one, with Executor "sequential". A failed
//     execution that lost weights it had donated also leaves the Runtime unusable; any other
//     error leaves it as it was.
//   - Training: TrainStep is one compiled executable per bucket doing forward, masked
//     cross-entropy, gradients, global-norm clipping and AdamW (no weight decay on norms and
//     biases); the learning rate is an input, so schedules never recompile. A step whose loss or
//     gradient norm is not finite changes nothing (weights, moments and step stay put) and reports
//     the non-finite values. Same seed + same batches give bit-identical weights on the sequential
//     executor; OptimizerState/SetOptimizerState and SaveOptimizer/LoadOptimizer restore AdamW
//     exactly. StepObjective/EvalObjective run other objectives (algorithms/objective) with the same
//     update, each on its own batch type; a batch of another objective, or one that cannot be laid
//     out, is an error.
//   - Memory: the model config's attention (auto: blocked from 1,024 tokens on the Go backend) and
//     remat choose how steps compute; Options.MemoryBudget makes a step whose executor-estimated
//     intermediate memory exceeds it recompute per layer (remat "layer", bit-identical results);
//     TrainStepMemory tells which and how much without running. docs/engine-memory.md.
//   - Weights: safetensors with Hugging Face tensor names through algorithms/hf (io.Reader/
//     io.Writer, one tensor converted at a time; LoadWeights also takes hf.Join's stream of
//     shards), PEFT adapter files, and local model directories (SaveModelDir; DirSource and
//     DirSink serve hf's directory reader and writer). Loading a model is activities/train's Load.
//   - MFU: against Options.PeakGFLOPS, the machine's attainable rate as `temper bench peak`
//     measures it with MeasureMatmul (the engine's float32 matmul on every core); without one,
//     Stats report no MFU rather than one against an assumed figure.
//   - Methods are safe for concurrent use; executions are serialized.
//
// Imports: algorithms/..., GoMLX/compute and the standard library (os for model directories and
// /proc/self/status). No Temporal, no cloud storage.
package tpu
