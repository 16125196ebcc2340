// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// dispatchOps are the binary ops binary_dispatch.go takes over, with the generated executor each
// replaces: upstream's own code is the reference the fork must reproduce bit for bit.
var dispatchOps = []struct {
	op        compute.OpType
	generated gobackend.NodeExecutor
}{
	{compute.OpTypeAdd, execAdd},
	{compute.OpTypeSub, execSub},
	{compute.OpTypeMul, execMul},
	{compute.OpTypeDiv, execDiv},
	{compute.OpTypeMax, execMax},
	{compute.OpTypeMin, execMin},
}

// TestRunsOpsTable: binary_dispatch.go takes over exactly dispatchOps.
func TestRunsOpsTable(t *testing.T) {
	var got, want []compute.OpType
	for _, o := range runsOps {
		got = append(got, o.op)
	}
	for _, o := range dispatchOps {
		want = append(want, o.op)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("runsOps covers %v, want %v", got, want)
	}
}

// TestRunsExecutorMatchesGenerated: for every op, dtype and broadcasting form (scalar on either
// side, equal shapes, runs on one or both sides, a broadcast the run loop refuses), with inputs
// donated or not, the fork's executor writes the same bits as the generated executor it replaces.
func TestRunsExecutorMatchesGenerated(t *testing.T) {
	b := testBackend(t)
	shapeCases := []struct {
		name     string
		lhs, rhs []int
		owned    []bool
	}{
		{"rhs scalar", []int{3, 17}, nil, []bool{false, false}},
		{"rhs size-1", []int{3, 17}, []int{1, 1}, []bool{false, false}},
		{"lhs scalar", nil, []int{3, 17}, []bool{false, false}},
		{"lhs size-1", []int{1, 1}, []int{3, 17}, []bool{false, false}},
		{"both scalar", nil, nil, []bool{false, false}},
		{"equal", []int{2, 3, 17}, []int{2, 3, 17}, []bool{false, false}},
		{"equal donated rhs", []int{2, 3, 17}, []int{2, 3, 17}, []bool{false, true}},
		{"equal donated lhs", []int{40}, []int{40}, []bool{true, false}},
		{"rows", []int{4, 33}, []int{1, 33}, []bool{false, false}},
		{"rows donated", []int{4, 33}, []int{1, 33}, []bool{true, false}},
		{"columns", []int{4, 33}, []int{4, 1}, []bool{false, false}},
		{"lhs rows", []int{1, 33}, []int{4, 33}, []bool{false, false}},
		{"both sides", []int{4, 1, 17}, []int{1, 3, 17}, []bool{false, false}},
		{"outer product", []int{5, 1}, []int{1, 7}, []bool{false, false}},
		{"mixed rank 3", []int{2, 1, 5}, []int{2, 3, 1}, []bool{false, false}},
	}
	dts := []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.Int8, dtypes.Int32, dtypes.Int64,
		dtypes.Uint8, dtypes.Uint64, dtypes.BFloat16, dtypes.Float16}
	rng := rand.New(rand.NewPCG(38, 8))
	for _, o := range runsOps {
		generated := reference(t, o.op)
		fork := runsExecutor(o.op, o.commutative, o.generated)
		for _, dt := range dts {
			for _, sc := range shapeCases {
				name := fmt.Sprintf("%s/%s/%s", o.op, dt, sc.name)
				ls, rs := shapes.Make(dt, sc.lhs...), shapes.Make(dt, sc.rhs...)
				lhs := randomFlat(rng, dt, ls.Size(), false)
				rhs := randomFlat(rng, dt, rs.Size(), o.op == compute.OpTypeDiv)
				node := &gobackend.Node{OpType: o.op, Shape: broadcastShape(ls, rs)}
				want, err := runExecutor(b, generated, node, lhs, rhs, ls, rs, sc.owned)
				if err != nil {
					t.Fatalf("%s: generated executor: %+v", name, err)
				}
				got, err := runExecutor(b, fork, node, lhs, rhs, ls, rs, sc.owned)
				if err != nil {
					t.Fatalf("%s: fork executor: %+v", name, err)
				}
				if !got.RawShape.Equal(node.Shape) || !bytes.Equal(flatBytes(got.Flat), flatBytes(want.Flat)) {
					t.Fatalf("%s: fork executor gave %s %v, generated %s %v", name, got.RawShape, got.Flat, want.RawShape, want.Flat)
				}
			}
		}
	}
}

// TestRunsExecutorUnsupportedDType: a dtype the op does not take keeps the generated executor's
// error.
func TestRunsExecutorUnsupportedDType(t *testing.T) {
	b := testBackend(t)
	s := shapes.Make(dtypes.Bool, 4)
	node := &gobackend.Node{OpType: compute.OpTypeAdd, Shape: s}
	_, err := runExecutor(b, runsExecutor(compute.OpTypeAdd, true, execAdd), node,
		[]bool{true, false, true, false}, []bool{true, true, false, false}, s, s, []bool{false, false})
	if err == nil || !strings.Contains(err.Error(), "unsupported data type Bool for Add") {
		t.Fatalf("Add of bools: error %v, want the generated executor's unsupported data type error", err)
	}
}

// TestRunsExecutorRegistered: the backend executes the six ops with the fork's executors, whatever
// registers at the generated executors' priority afterwards (so gen_exec_binary.go's init order
// cannot undo the fork), and the results are the generated executors'.
func TestRunsExecutorRegistered(t *testing.T) {
	b := testBackend(t)
	for _, o := range dispatchOps {
		gobackend.SetNodeExecutor(o.op, gobackend.PriorityGeneric,
			func(*gobackend.Backend, *gobackend.Node, []*gobackend.Buffer, []bool) (*gobackend.Buffer, error) {
				return nil, fmt.Errorf("generated-priority executor of %s ran: the fork's is not registered", o.op)
			})
		t.Cleanup(func() { gobackend.SetNodeExecutor(o.op, gobackend.PriorityGeneric, o.generated) })
	}
	cases := []struct{ lhs, rhs []int }{{[]int{4, 33}, []int{1, 33}}, {[]int{1, 1}, []int{4, 33}}, {[]int{4, 33}, nil}, {nil, []int{4, 33}}}
	rng := rand.New(rand.NewPCG(38, 9))
	for _, o := range dispatchOps {
		for _, c := range cases {
			ls, rs := shapes.Make(dtypes.Float32, c.lhs...), shapes.Make(dtypes.Float32, c.rhs...)
			lhs, rhs := randomFlat(rng, dtypes.Float32, ls.Size(), false), randomFlat(rng, dtypes.Float32, rs.Size(), true)
			name := fmt.Sprintf("%s %v %v", o.op, c.lhs, c.rhs)
			got, err := executeGraph(b, o.op, lhs, rhs, ls, rs)
			if err != nil {
				t.Fatalf("%s through the backend: %+v", name, err)
			}
			node := &gobackend.Node{OpType: o.op, Shape: broadcastShape(ls, rs)}
			want, err := runExecutor(b, o.generated, node, lhs, rhs, ls, rs, []bool{false, false})
			if err != nil {
				t.Fatalf("%s: generated executor: %+v", name, err)
			}
			if !bytes.Equal(flatBytes(got.Flat), flatBytes(want.Flat)) {
				t.Fatalf("%s through the backend: %v, generated executor %v", name, got.Flat, want.Flat)
			}
		}
	}
}

// executeGraph compiles and runs op(x, y) on the backend.
func executeGraph(b *gobackend.Backend, op compute.OpType, lhs, rhs any, ls, rs shapes.Shape) (*gobackend.Buffer, error) {
	builder := b.Builder("dispatch_" + op.String())
	fn := builder.Main()
	x, err := fn.Parameter("x", ls, nil)
	if err != nil {
		return nil, err
	}
	y, err := fn.Parameter("y", rs, nil)
	if err != nil {
		return nil, err
	}
	build := map[compute.OpType]func(compute.Value, compute.Value) (compute.Value, error){
		compute.OpTypeAdd: fn.Add, compute.OpTypeSub: fn.Sub, compute.OpTypeMul: fn.Mul,
		compute.OpTypeDiv: fn.Div, compute.OpTypeMax: fn.Max, compute.OpTypeMin: fn.Min,
	}[op]
	z, err := build(x, y)
	if err != nil {
		return nil, err
	}
	if err := fn.Return([]compute.Value{z}, nil); err != nil {
		return nil, err
	}
	exec, err := builder.Compile()
	if err != nil {
		return nil, err
	}
	xb, err := b.BufferFromFlatData(0, lhs, ls)
	if err != nil {
		return nil, err
	}
	yb, err := b.BufferFromFlatData(0, rhs, rs)
	if err != nil {
		return nil, err
	}
	outs, err := exec.Execute([]compute.Buffer{xb, yb}, nil, 0)
	if err != nil {
		return nil, err
	}
	return outs[0].(*gobackend.Buffer), nil
}

func reference(t *testing.T, op compute.OpType) gobackend.NodeExecutor {
	t.Helper()
	for _, o := range dispatchOps {
		if o.op == op {
			return o.generated
		}
	}
	t.Fatalf("no generated executor for %s", op)
	return nil
}

func testBackend(t *testing.T) *gobackend.Backend {
	t.Helper()
	cb, err := gobackend.New("")
	if err != nil {
		t.Fatalf("new backend: %+v", err)
	}
	b := cb.(*gobackend.Backend)
	t.Cleanup(b.Finalize)
	return b
}

// runExecutor runs exec on fresh copies of lhs and rhs (a donated input may become the output).
func runExecutor(b *gobackend.Backend, exec gobackend.NodeExecutor, node *gobackend.Node, lhs, rhs any,
	ls, rs shapes.Shape, owned []bool) (*gobackend.Buffer, error) {
	inputs := make([]*gobackend.Buffer, 2)
	for i, in := range []struct {
		flat any
		s    shapes.Shape
	}{{lhs, ls}, {rhs, rs}} {
		buf, err := b.BufferFromFlatData(0, in.flat, in.s)
		if err != nil {
			return nil, err
		}
		inputs[i] = buf.(*gobackend.Buffer)
	}
	return exec(b, node, inputs, append([]bool(nil), owned...))
}

func broadcastShape(ls, rs shapes.Shape) shapes.Shape {
	switch {
	case ls.Rank() == 0:
		return rs
	case rs.Rank() == 0:
		return ls
	}
	dims := make([]int, ls.Rank())
	for i := range dims {
		dims[i] = max(ls.Dimensions[i], rs.Dimensions[i])
	}
	return shapes.Make(ls.DType, dims...)
}

// randomFlat returns n values of dtype dt: small integers and halves, and for floats also ±0,
// ±Inf and NaN; nonzero leaves out zeros (integer division by zero panics).
func randomFlat(rng *rand.Rand, dt dtypes.DType, n int, nonzero bool) any {
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN()}
	vals := make([]float64, n)
	for i := range vals {
		v := float64(rng.IntN(19) - 9)
		if nonzero && v == 0 {
			v = 3
		}
		if dt.IsFloat() {
			v += 0.5 * float64(rng.IntN(2))
			if rng.IntN(8) == 0 {
				v = specials[rng.IntN(len(specials))]
			}
		}
		vals[i] = v
	}
	switch dt { //nolint:exhaustive
	case dtypes.Float32:
		return convertFlat(vals, func(v float64) float32 { return float32(v) })
	case dtypes.Float64:
		return vals
	case dtypes.Int8:
		return convertFlat(vals, func(v float64) int8 { return int8(v) })
	case dtypes.Int32:
		return convertFlat(vals, func(v float64) int32 { return int32(v) })
	case dtypes.Int64:
		return convertFlat(vals, func(v float64) int64 { return int64(v) })
	case dtypes.Uint8: // 1..19: negative values would not survive the conversion
		return convertFlat(vals, func(v float64) uint8 { return uint8(v + 10) })
	case dtypes.Uint64:
		return convertFlat(vals, func(v float64) uint64 { return uint64(v + 10) })
	case dtypes.BFloat16:
		return convertFlat(vals, func(v float64) bfloat16.BFloat16 { return bfloat16.FromFloat32(float32(v)) })
	case dtypes.Float16:
		return convertFlat(vals, func(v float64) float16.Float16 { return float16.FromFloat32(float32(v)) })
	}
	panic("randomFlat: no generator for " + dt.String())
}

func convertFlat[T any](vals []float64, f func(float64) T) []T {
	out := make([]T, len(vals))
	for i, v := range vals {
		out[i] = f(v)
	}
	return out
}

// flatBytes is the memory of a flat slice, for bit-exact comparisons (NaN included).
func flatBytes(flat any) []byte {
	v := reflect.ValueOf(flat)
	if v.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*int(v.Type().Elem().Size()))
}
