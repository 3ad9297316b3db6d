package main

import (
	"testing"

	"github.com/suzuran-app/suzuran/app/modelhost"
)

func TestTrayModelLine(t *testing.T) {
	cases := []struct {
		state modelhost.ModelState
		want  string
	}{
		{modelhost.ModelState{State: modelhost.StateLoading, Name: "Suzuran Tiny", Demo: true, Progress: 0.426}, "Loading demo model Suzuran Tiny… 43 %"},
		{modelhost.ModelState{State: modelhost.StateReady, Name: "Qwen3.6-35B-A3B-4bit"}, "Ready: Qwen3.6-35B-A3B-4bit"},
		{modelhost.ModelState{State: modelhost.StateLoading, Name: "Qwen3.6-35B-A3B-4bit", Progress: 0.95, Checking: true}, "Checking the GPU for Qwen3.6-35B-A3B-4bit…"},
		{modelhost.ModelState{State: modelhost.StateReady, Name: "Qwen3.6-35B-A3B-4bit", Fallback: "Running on the CPU: the GPU check failed — the GPU kernels did not compile; answers are slower"}, "Ready on the CPU: Qwen3.6-35B-A3B-4bit"},
		{modelhost.ModelState{State: modelhost.StateError, Name: "x", Error: "model.safetensors: no such file"}, "Model error: model.safetensors: no such file"},
		{modelhost.ModelState{State: modelhost.StateUnloaded, Name: "Qwen3.6-35B-A3B-4bit"}, "Unloaded (idle): Qwen3.6-35B-A3B-4bit"},
		{modelhost.ModelState{}, "Model: starting…"},
	}
	for _, c := range cases {
		if got := modelLine(c.state); got != c.want {
			t.Errorf("modelLine(%+v) = %q, want %q", c.state, got, c.want)
		}
	}
}
