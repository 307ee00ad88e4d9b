// Package fidelity holds the test that compares pkg/engine's prediction
// with what the real Karpenter (v1.14, its kwok provider, on the test control
// plane of internal/testenv) launches for the same pending pods and the same
// instance types. It has no code of its own; run it with
//
//	go test -v -run TestFidelity ./pkg/engine/fidelity
//
// (KM_SKIP_E2E=1 skips it; the control-plane binaries come from
// `make controlplane`).
package fidelity
