//go:build !amd64 && !arm64

package cpu

// machineKernels lists the levels this CPU runs: the Go loops only.
func machineKernels() []kernelSet { return []kernelSet{{isa: ISAGeneric}} }
