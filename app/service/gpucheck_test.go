package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/engine/gpu/device"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
)

// gpuFaults is the emulator standing in for Metal with a Mac GPU's
// failures to switch on: a kernel that does not compile, and command
// buffers that end in error (failWaits, switched on after the check).
type gpuFaults struct {
	compile   atomic.Bool
	failWaits atomic.Bool
	opened    atomic.Int32
}

func (f *gpuFaults) open(name string, threads int) (device.Device, error) {
	dev, err := emu.New(emu.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	f.opened.Add(1)
	return &faultyDevice{Device: dev, f: f}, nil
}

type faultyDevice struct {
	device.Device
	f *gpuFaults
}

func (d *faultyDevice) Pipeline(name string) (device.Pipeline, error) {
	if d.f.compile.Load() {
		return nil, fmt.Errorf("metal: compiling metalkernels/gemv.metal (MSL 3.1) on %s: program_source:41:9: error: use of undeclared identifier 'simd_sum4'", d.Name())
	}
	return d.Device.Pipeline(name)
}

func (d *faultyDevice) NewCommandBuffer() (device.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	return &faultyBuffer{CommandBuffer: cb, f: d.f}, nil
}

type faultyBuffer struct {
	device.CommandBuffer
	f *gpuFaults
}

func (c *faultyBuffer) Wait() error {
	err := c.CommandBuffer.Wait()
	if err == nil && c.f.failWaits.Load() {
		err = errors.New("metal: command buffer failed: Internal Error (0000000e:Internal Error) (victim of GPU error/recovery)")
	}
	return err
}

// openGPUService opens a service on the emu backend over faults, with its
// files in dir, and waits for the model.
func openGPUService(t *testing.T, dir string, faults *gpuFaults) *Service {
	t.Helper()
	svc, err := Open(Options{
		DatabasePath: filepath.Join(dir, "suzuran.db"),
		SettingsPath: filepath.Join(dir, "settings.json"),
		Model:        demo(t),
		Backend:      "emu",
		Threads:      1,
		Version:      "test",
		Log:          zerolog.Nop(),
		GPUCheck:     gpucheck.Options{OpenDevice: faults.open},
		Report:       func() (string, error) { return `{"schema":1,"ok":false}`, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	waitModel(t, svc, modelhost.StateReady)
	return svc
}

// TestGPUFailsMidAnswer: the GPU passes its check, then a command buffer
// fails while a reply is written. The reply ends in error saying so, the
// window's model state says the app runs on the CPU and why, the
// conversation keeps the question, and the next question is answered on
// the CPU in the same conversation.
func TestGPUFailsMidAnswer(t *testing.T) {
	faults := &gpuFaults{}
	svc := openGPUService(t, t.TempDir(), faults)
	ui := svc.UI()
	if m := svc.ModelState(); !strings.Contains(m.Backend, "emu") || m.Fallback != "" {
		t.Fatalf("model %+v, want the emu backend and no fallback", m)
	}
	events, stop := svc.Subscribe()
	defer stop()

	faults.failWaits.Store(true)
	first, err := ui.Send(SendRequest{Text: "What does itertools.chain do?"})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitReply(t, svc, first.Reply.ID)
	if failed.Status != store.StatusError || !strings.Contains(failed.Error, "command buffer failed") || !strings.Contains(failed.Error, "now runs on cpu") {
		t.Fatalf("reply during the failure: %s %q, want an error naming the GPU's failure and the CPU", failed.Status, failed.Error)
	}
	want := "Running on the CPU: the GPU failed while answering — the GPU reported an error"
	deadline := time.After(30 * time.Second) // generous: a loaded machine
	for told := false; !told; {
		select {
		case ev := <-events:
			told = ev.Type == EventModel && strings.HasPrefix(ev.Model.Fallback, want)
		case <-deadline:
			t.Fatalf("no model event with the fallback message; state %+v", svc.ModelState())
		}
	}
	if m := svc.ModelState(); !strings.HasPrefix(m.Backend, "cpu") || m.State != modelhost.StateReady {
		t.Errorf("model %+v after the failure, want ready on cpu", m)
	}

	next, err := ui.Send(SendRequest{ConversationID: first.Conversation.ID, Text: "And itertools.islice?"})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitReply(t, svc, next.Reply.ID); r.Status != store.StatusComplete || r.Content == "" {
		t.Errorf("the next reply: %s %q %q, want an answer", r.Status, r.Content, r.Error)
	}
	view, err := ui.Conversation(first.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	var questions []string
	for _, m := range view.Messages {
		if m.Role == "user" {
			questions = append(questions, m.Content)
		}
	}
	if len(questions) != 2 || questions[0] != "What does itertools.chain do?" {
		t.Errorf("the conversation's questions %q, want both, the first kept", questions)
	}
}

// TestGPUCheckFails: a kernel that does not compile on the first start
// loads the model on the CPU, and the model state says so in words before
// anything is asked; the result is remembered beside settings.json, so the
// next start (with a GPU that would now pass) goes to the CPU without
// checking; Settings' RecheckGPU checks again and moves to the GPU. The
// window's "Copy report" gets the doctor's report.
func TestGPUCheckFails(t *testing.T) {
	dir := t.TempDir()
	faults := &gpuFaults{}
	faults.compile.Store(true)
	svc := openGPUService(t, dir, faults)
	m := svc.ModelState()
	if !strings.HasPrefix(m.Backend, "cpu") || m.Fallback != "Running on the CPU: the GPU check failed — the GPU kernels did not compile; answers are slower" {
		t.Fatalf("model %+v, want the cpu backend and the check's failure in words", m)
	}
	res, err := svc.UI().Send(SendRequest{Text: "What does itertools.chain do?"})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitReply(t, svc, res.Reply.ID); r.Status != store.StatusComplete || r.Content == "" {
		t.Errorf("reply on the CPU: %s %q", r.Status, r.Error)
	}
	if rep, err := svc.UI().Report(); err != nil || !strings.Contains(rep, `"schema"`) {
		t.Errorf("report %q, %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(dir, GPUCheckFile)); err != nil {
		t.Fatalf("the result is not remembered beside the settings: %v", err)
	}
	svc.Close()

	faults.compile.Store(false)
	svc2 := openGPUService(t, dir, faults)
	if m := svc2.ModelState(); !strings.HasPrefix(m.Backend, "cpu") || !strings.Contains(m.Fallback, "did not compile") {
		t.Errorf("second start: %+v, want the remembered failure on the cpu backend", m)
	}
	if err := svc2.UI().RecheckGPU(); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, svc2, 60*time.Second, "the model ready on emu after RecheckGPU", func(*Event) bool {
		m := svc2.ModelState()
		return m.State == modelhost.StateReady && strings.Contains(m.Backend, "emu")
	})
	if m := svc2.ModelState(); m.Fallback != "" {
		t.Errorf("after a passing recheck the fallback still says %q", m.Fallback)
	}

}
