package trainapi

import "github.com/temperml/temper/algorithms/objective/objectivecfg"

// Distillation activity names, registered by workers on the trainer queue.
const (
	DistillTargetsName = "train.DistillTargets"
	DistillChunkName   = "train.DistillChunk"
)

// Where a distill phase's teacher distributions come from.
const (
	// TeacherPrecomputed: the teacher's top-k distribution at every completion position of every
	// training example, computed once before the first chunk and stored (DistillTargets).
	TeacherPrecomputed = "precomputed"
	// TeacherOnTheFly: the teacher is loaded beside the student in each chunk and run on every batch
	// (needed for the student's own samples, and for a full distribution).
	TeacherOnTheFly = "on_the_fly"
)

// DistillTargetsInput asks for the teacher's top-k targets of every training example of Data.
type DistillTargetsInput struct {
	Store   string   `json:"store"`
	Run     string   `json:"run"`
	Phase   string   `json:"phase"`
	Teacher string   `json:"teacher"` // checkpoint URI
	Data    DataSpec `json:"data"`
	Seq     int      `json:"seq"` // batch.seq: the longest example
	TopK    int      `json:"top_k"`
	// Temperature τ of the stored log-probs (log softmax(logits/τ) at the k ids).
	Temperature float64 `json:"temperature"`
	Seed        uint64  `json:"seed"`
}

// DistillTargetsOutput is the stored targets object: one JSONL line per training example.
type DistillTargetsOutput struct {
	Targets  string `json:"targets"`
	Examples int    `json:"examples"`
	Resumed  bool   `json:"resumed"` // an earlier attempt wrote the object
}

// DistillChunkInput trains Steps distillation steps of the student From towards Teacher (on the fly)
// or towards the precomputed Targets. Batches hold one example per row, Batch.Seq tokens long.
type DistillChunkInput struct {
	ChunkHead
	Data    DataSpec                   `json:"data"`
	Batch   BatchSpec                  `json:"batch"`
	Loss    objectivecfg.DistillConfig `json:"loss"`
	Teacher string                     `json:"teacher,omitempty"` // checkpoint URI, when on the fly
	Targets string                     `json:"targets,omitempty"` // DistillTargets' object, when precomputed
}
