// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fusedops

// Elementwise helpers of the blocked attention (flashattn.go). Each element is computed exactly
// as written, without fused multiply-adds (float32(x*y) rounds before an add), so the AVX2 loops
// and the scalar tails give the same bits; sums and maxima go in one fixed order (eight running
// lanes, then the lanes in a fixed tree, then the tail) on every machine.

// vecMax is the largest element of x (-Inf for an empty or all -Inf x).
func vecMax(x []float32) float32 {
	m := negInf
	i := maxVector(x, &m)
	for ; i < len(x); i++ {
		if x[i] > m {
			m = x[i]
		}
	}
	return m
}

// vecSum adds x: lane j of eight adds elements j, j+8, …; then the lanes, then the tail in order.
func vecSum(x []float32) float32 {
	var lanes [8]float32
	i := sumVector(x, &lanes)
	for ; i+8 <= len(x); i += 8 {
		for j := range 8 {
			lanes[j] += x[i+j]
		}
	}
	s := ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
	for ; i < len(x); i++ {
		s += x[i]
	}
	return s
}

// vecSubScalar sets x[i] -= c.
func vecSubScalar(x []float32, c float32) {
	for i := subScalarVector(x, c); i < len(x); i++ {
		x[i] -= c
	}
}

// vecSub sets x[i] -= y[i].
func vecSub(x, y []float32) {
	y = y[:len(x)]
	for i := subVector(x, y); i < len(x); i++ {
		x[i] -= y[i]
	}
}

// vecAdd sets x[i] += y[i].
func vecAdd(x, y []float32) {
	y = y[:len(x)]
	for i := addVector(x, y); i < len(x); i++ {
		x[i] += y[i]
	}
}

// vecScaleAdd sets x[i] = x[i]·a + y[i] (rounded after the product).
func vecScaleAdd(x []float32, a float32, y []float32) {
	y = y[:len(x)]
	for i := scaleAddVector(x, a, y); i < len(x); i++ {
		x[i] = float32(x[i]*a) + y[i]
	}
}

// vecDiv sets x[i] /= c.
func vecDiv(x []float32, c float32) {
	for i := divVector(x, c); i < len(x); i++ {
		x[i] /= c
	}
}

// vecDScores sets p[i] = p[i]·(dp[i] − dl[i or 0]): one dl for the row when len(dl) is 1.
func vecDScores(p, dp, dl []float32) {
	dp = dp[:len(p)]
	if len(dl) == 1 {
		c := dl[0]
		for i := dScoresVector(p, dp, c); i < len(p); i++ {
			p[i] *= dp[i] - c
		}
		return
	}
	dl = dl[:len(p)]
	for i := dScoresColsVector(p, dp, dl); i < len(p); i++ {
		p[i] *= dp[i] - dl[i]
	}
}

// vecOneMinusSquare sets g[i] *= 1 − t[i]² (the derivative of tanh from its value).
func vecOneMinusSquare(g, t []float32) {
	t = t[:len(g)]
	for i := oneMinusSquareVector(g, t); i < len(g); i++ {
		g[i] *= 1 - float32(t[i]*t[i])
	}
}

// vecScaleMax sets x[i] *= c and returns vecMax(x) of the result, in one pass (Temper fork: the
// decode attention's scores, decodeattn.go).
func vecScaleMax(x []float32, c float32) float32 {
	m := negInf
	i := scaleMaxVector(x, c, &m)
	for ; i < len(x); i++ {
		x[i] *= c
		if x[i] > m {
			m = x[i]
		}
	}
	return m
}

// vecScale sets x[i] *= c.
func vecScale(x []float32, c float32) {
	for i := scaleVector(x, c); i < len(x); i++ {
		x[i] *= c
	}
}

// vecDot is Σ x[i]·y[i] (each product rounded before its add), in vecSum's order: lane j of eight
// adds the products j, j+8, …; then the lanes in a fixed tree, then the tail in order. Temper fork:
// the decode attention's scores (decodeattn.go).
func vecDot(x, y []float32) float32 {
	y = y[:len(x)]
	var lanes [8]float32
	i := dotVector(x, y, &lanes)
	for ; i+8 <= len(x); i += 8 {
		for j := range 8 {
			lanes[j] += float32(x[i+j] * y[i+j])
		}
	}
	s := ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
	for ; i < len(x); i++ {
		s += float32(x[i] * y[i])
	}
	return s
}

// vecAxpy sets x[i] += a·y[i] (rounded after the product). Temper fork: the decode attention's
// weighted sum of values (decodeattn.go).
func vecAxpy(x []float32, a float32, y []float32) {
	y = y[:len(x)]
	for i := axpyVector(x, a, y); i < len(x); i++ {
		x[i] += float32(a * y[i])
	}
}

// rowScores sets sc[t] = vecDot(q, key row vis[t]) for the keys [keys, len(q)] (Temper fork: the
// decode attention's scores, decodeattn.go; one call per query row, not per key).
func rowScores(sc, q, keys []float32, vis []int32) {
	d := len(q)
	if rowScoresVector(sc, q, keys, vis) {
		return
	}
	for t, j := range vis {
		sc[t] = vecDot(q, keys[int(j)*d:int(j)*d+d])
	}
}

// rowAccumulate adds p[t]·(value row vis[t]) into o for t in increasing order, each as vecAxpy
// (Temper fork: the decode attention's weighted sum of values, decodeattn.go).
func rowAccumulate(o, p, values []float32, vis []int32) {
	d := len(o)
	if rowAccumulateVector(o, p, values, vis) {
		return
	}
	for t, j := range vis {
		vecAxpy(o, p[t], values[int(j)*d:int(j)*d+d])
	}
}

// groupScores sets sc[r·n + t] = vecDot(query row r, key row vis[t]) for the nr query rows q
// [nr, d] (n = len(vis)); each key row is read once for all of them where the machine allows
// (Temper fork: decodeattn.go).
func groupScores(sc, q []float32, nr int, keys []float32, vis []int32) {
	if groupScoresVector(sc, q, nr, keys, vis) {
		return
	}
	d, n := len(q)/nr, len(vis)
	for r := range nr {
		rowScores(sc[r*n:(r+1)*n], q[r*d:(r+1)*d], keys, vis)
	}
}

// groupAccumulate adds p[r·n + t]·(value row vis[t]) into row r of o [nr, d] for t in increasing
// order, as rowAccumulate does row by row (Temper fork: decodeattn.go).
func groupAccumulate(o, p []float32, nr int, values []float32, vis []int32) {
	if groupAccumulateVector(o, p, nr, values, vis) {
		return
	}
	d, n := len(o)/nr, len(vis)
	for r := range nr {
		rowAccumulate(o[r*d:(r+1)*d], p[r*n:(r+1)*n], values, vis)
	}
}
