package host_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/suzuran-app/suzuran/metalkernels/host"
)

// Compile a kernel from MSL text, bind a constant struct and two buffers,
// and run one threadgroup of 8 threads.
func ExampleCompile() {
	const src = `#include <metal_stdlib>
using namespace metal;
struct Params { float scale; };
kernel void scaled_prefix(constant Params& p [[buffer(0)]],
                          const device float* x [[buffer(1)]],
                          device float* y [[buffer(2)]],
                          uint i [[thread_position_in_grid]]) {
    y[i] = simd_prefix_inclusive_sum(x[i]) * p.scale;
}
`
	lib, err := host.Compile(map[string]string{"example.metal": src}, host.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	k, err := lib.Kernel("scaled_prefix")
	if err != nil {
		fmt.Println(err)
		return
	}
	x, _ := host.Alloc(4 * 8)
	y, _ := host.Alloc(4 * 8)
	defer x.Free()
	defer y.Free()
	for i := range 8 {
		binary.LittleEndian.PutUint32(x.Bytes()[4*i:], math.Float32bits(float32(i)))
	}
	params := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5))
	err = k.Dispatch(host.Size3{X: 1}, host.Size3{X: 8}, []host.Arg{
		{Index: 0, Bytes: params}, {Index: 1, Buffer: x.Bytes()}, {Index: 2, Buffer: y.Bytes()},
	}, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 8 {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(y.Bytes()[4*i:])), " ")
	}
	fmt.Println()
	// Output: 0 0.5 1.5 3 5 7.5 10.5 14
}
