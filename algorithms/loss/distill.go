package loss

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// Token-level distillation divergences between a student's and a teacher's next-token distributions
// at temperature τ (p^τ = softmax(logits/τ)), for logit distillation (Hinton et al., 2015) and
// generalized knowledge distillation (GKD: Agarwal et al., 2024, "On-Policy Distillation of Language
// Models"). Each returns τ²· the masked mean over tokens of its per-token divergence (τ² keeps the
// gradient's scale independent of τ, as in Hinton et al.), and metrics:
//
//	student, teacher: logits [batch, seq, vocab]; mask: [batch, seq] (Bool or numeric; 1 where the
//	token position counts) → scalar
//
// The teacher is a constant (StopGradient); gradients flow into the student only.

// DistillForwardKL is KL(p_T ‖ p_S) = Σ_v p_T(v)·(log p_T(v) − log p_S(v)): mode-covering, the
// classic distillation target on fixed data.
func DistillForwardKL(student, teacher, mask *Node, tau float64) (*Node, Metrics) {
	s, t := distillLogProbs(student, teacher, tau)
	return distillMean(klTerms(t, s), mask, tau, "forward_kl")
}

// DistillReverseKL is KL(p_S ‖ p_T) = Σ_v p_S(v)·(log p_S(v) − log p_T(v)): mode-seeking, used on the
// student's own samples.
func DistillReverseKL(student, teacher, mask *Node, tau float64) (*Node, Metrics) {
	s, t := distillLogProbs(student, teacher, tau)
	return distillMean(klTerms(s, t), mask, tau, "reverse_kl")
}

// DistillJSD is GKD's β-skewed generalized Jensen–Shannon divergence, with M = β·p_T + (1−β)·p_S:
//
//	JSD_β = β·KL(p_T ‖ M) + (1−β)·KL(p_S ‖ M)      for 0 < β < 1
//
// Since JSD_β vanishes at both ends, β = 0 is taken to mean forward KL and β = 1 reverse KL (as TRL's
// GKD trainer does), so β interpolates from mode-covering to mode-seeking. Panics on β outside [0, 1]
// (configs validate it first).
func DistillJSD(student, teacher, mask *Node, beta, tau float64) (*Node, Metrics) {
	switch {
	case beta < 0 || beta > 1 || math.IsNaN(beta):
		panic(fmt.Errorf("loss: distill jsd: beta %g: allowed [0, 1]", beta))
	case beta == 0:
		return DistillForwardKL(student, teacher, mask, tau)
	case beta == 1:
		return DistillReverseKL(student, teacher, mask, tau)
	}
	s, t := distillLogProbs(student, teacher, tau)
	// log M = logsumexp(log β + log p_T, log(1−β) + log p_S), elementwise.
	a, b := AddScalar(t, math.Log(beta)), AddScalar(s, math.Log(1-beta))
	hi := Max(a, b)
	logM := Add(hi, Log(Add(Exp(Sub(a, hi)), Exp(Sub(b, hi)))))
	per := Add(MulScalar(klTerms(t, logM), beta), MulScalar(klTerms(s, logM), 1-beta))
	return distillMean(per, mask, tau, "jsd")
}

// DistillForwardKLTopK is DistillForwardKL against a teacher kept as its k most likely tokens per
// position (what a precomputed pass stores): the teacher's distribution is renormalised over those
// k tokens, and the student's log-probabilities are read at them.
//
//	student: logits [batch, seq, vocab]; teacherIDs: [batch, seq, k] int32 token ids;
//	teacherLogProbs: [batch, seq, k] log p_T^τ of those ids (any constant offset per position is
//	removed by the renormalisation); mask: [batch, seq] → scalar
func DistillForwardKLTopK(student, teacherIDs, teacherLogProbs, mask *Node, tau float64) (*Node, Metrics) {
	vocab := student.Shape().Dim(-1)
	s := LogSoftmax(DivScalar(student, tau), -1) // [b, s, V]
	oh := OneHot(teacherIDs, vocab, s.DType())   // [b, s, k, V]
	sAtK := ReduceSum(Mul(oh, InsertAxes(s, -2)), -1)
	t := LogSoftmax(StopGradient(teacherLogProbs), -1) // renormalised over the k ids
	per := ReduceSum(Mul(Exp(t), Sub(t, sAtK)), -1)
	return distillMean(per, mask, tau, "forward_kl_topk")
}

// distillLogProbs: log-softmax of both at temperature τ, the teacher's as a constant.
func distillLogProbs(student, teacher *Node, tau float64) (s, t *Node) {
	if !student.Shape().Equal(teacher.Shape()) {
		panic(fmt.Errorf("loss: distill: student logits %s and teacher logits %s differ", student.Shape(), teacher.Shape()))
	}
	if tau <= 0 || math.IsNaN(tau) || math.IsInf(tau, 0) {
		panic(fmt.Errorf("loss: distill: temperature %g: must be > 0", tau))
	}
	return LogSoftmax(DivScalar(student, tau), -1), LogSoftmax(DivScalar(StopGradient(teacher), tau), -1)
}

// klTerms is Σ_v e^{p}·(p − q) over the last axis, for log-distributions p, q: [b, s, V] → [b, s].
func klTerms(p, q *Node) *Node { return ReduceSum(Mul(Exp(p), Sub(p, q)), -1) }

// distillMean is τ²·(masked mean of per [b, s]), with the mean per-token divergence as a metric.
func distillMean(per, mask *Node, tau float64, name string) (*Node, Metrics) {
	if !mask.Shape().EqualDimensions(per.Shape()) {
		panic(fmt.Errorf("loss: distill: mask %s does not match positions %s", mask.Shape(), per.Shape()))
	}
	w := AsWeights(mask, per)
	mean := Div(ReduceAllSum(Mul(per, w)), MaxScalar(ReduceAllSum(w), 1e-9))
	return MulScalar(mean, tau*tau), Metrics{name: StopGradient(mean)}
}
