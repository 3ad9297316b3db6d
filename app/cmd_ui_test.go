package main

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/service"
)

func TestUIFlagsRefused(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--addr", "0.0.0.0:8090"}, "loopback address only"},
		{[]string{"ui", "--addr", "192.168.1.2:8090"}, "loopback address only"},
		{[]string{"ui", "--addr", "8090"}, "write host:port"},
		{[]string{"ui", "--pace", "5s"}, "--pace 5s"},
		{[]string{"ui", "--threads", "-1"}, "--threads -1"},
	}
	for _, c := range cases {
		_, stderr, err := execute(t, c.args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("suzuran %s: %v %q, want an error saying %q", strings.Join(c.args, " "), err, stderr, c.want)
		}
	}
}

func TestTrayModelLine(t *testing.T) {
	cases := []struct {
		state service.ModelState
		want  string
	}{
		{service.ModelState{State: server.StateLoading, Name: "Suzuran Tiny", Demo: true, Progress: 0.426}, "Loading demo model Suzuran Tiny… 43 %"},
		{service.ModelState{State: server.StateReady, Name: "Qwen3.6-35B-A3B-4bit"}, "Ready: Qwen3.6-35B-A3B-4bit"},
		{service.ModelState{State: server.StateError, Name: "x", Error: "model.safetensors: no such file"}, "Model error: model.safetensors: no such file"},
		{service.ModelState{State: server.StateUnloaded, Name: "Qwen3.6-35B-A3B-4bit"}, "Unloaded (idle): Qwen3.6-35B-A3B-4bit"},
		{service.ModelState{}, "Model: starting…"},
	}
	for _, c := range cases {
		if got := modelLine(c.state); got != c.want {
			t.Errorf("modelLine(%+v) = %q, want %q", c.state, got, c.want)
		}
	}
}
