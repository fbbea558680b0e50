package sdk

import (
	"fmt"

	"github.com/wasmsched/wasmsched/abi"
)

// SerialPolicy decides for one serial group. DecideSerial appends actions to
// d (which arrives empty, with capacity kept from earlier calls). s and every
// string in it alias the SDK's input buffer: valid only during the call, so
// copy anything you keep. Appending to d and using s's strings as Run/Reason
// allocates nothing in steady state.
type SerialPolicy interface {
	DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision)
}

// ReusePolicy decides which task slots of a restored run to reuse. d arrives
// reset (Fail false, no reason, no verdicts); append one verdict per slot of
// r, in order, or set Fail.
type ReusePolicy interface {
	DecideReuse(r *abi.ReuseRequest, d *abi.ReuseDecision)
}

// guest state: all buffers are globals so the guest GC keeps them alive
// between wasmsched_input and wasmsched_decide, and reuses them across calls.
var (
	serialPolicy SerialPolicy
	reusePolicy  ReusePolicy

	inBuf  []byte
	outBuf []byte

	snap abi.SerialSnapshot
	sdec abi.SerialDecision
	req  abi.ReuseRequest
	rdec abi.ReuseDecision
)

// Register installs the plugin's policy; call it once, from an init function
// or package-level var. p must implement SerialPolicy or ReusePolicy (not
// both). It panics otherwise, which fails the plugin at load.
func Register(p any) {
	if serialPolicy != nil || reusePolicy != nil {
		panic("sdk: Register called twice")
	}
	s, isSerial := p.(SerialPolicy)
	r, isReuse := p.(ReusePolicy)
	switch {
	case isSerial && isReuse:
		panic(fmt.Sprintf("sdk: %T implements both SerialPolicy and ReusePolicy", p))
	case isSerial:
		serialPolicy = s
	case isReuse:
		reusePolicy = r
	default:
		panic(fmt.Sprintf("sdk: %T implements neither SerialPolicy nor ReusePolicy", p))
	}
}

// Kind returns the kind of the registered policy, or 0 if none is.
func Kind() abi.Kind {
	switch {
	case serialPolicy != nil:
		return abi.KindSerial
	case reusePolicy != nil:
		return abi.KindSlotReuse
	}
	return 0
}

// Input returns the guest input buffer with room for size bytes (what
// wasmsched_input exports). It returns nil if size exceeds abi.MaxRecordSize.
func Input(size int) []byte {
	if size < 0 || size > abi.MaxRecordSize {
		return nil
	}
	if cap(inBuf) < size || cap(inBuf) == 0 {
		n := 4096
		for n < size {
			n *= 2
		}
		inBuf = make([]byte, n)
	}
	return inBuf[:cap(inBuf)]
}

// Decide decodes the first n bytes of the input buffer, runs the registered
// policy and returns the encoded decision (what wasmsched_decide exports).
// The result aliases an SDK buffer reused by the next call.
func Decide(n int) ([]byte, error) {
	if n < 0 || n > len(inBuf) {
		return nil, fmt.Errorf("sdk: input length %d beyond buffer of %d bytes", n, len(inBuf))
	}
	return decide(inBuf[:n])
}

func decide(in []byte) ([]byte, error) {
	switch {
	case serialPolicy != nil:
		if err := abi.DecodeSerialSnapshotView(in, &snap); err != nil {
			return nil, err
		}
		sdec.Reset()
		serialPolicy.DecideSerial(&snap, &sdec)
		outBuf = abi.AppendSerialDecision(outBuf[:0], &sdec)
	case reusePolicy != nil:
		if err := abi.DecodeReuseRequestView(in, &req); err != nil {
			return nil, err
		}
		rdec.Reset()
		reusePolicy.DecideReuse(&req, &rdec)
		outBuf = abi.AppendReuseDecision(outBuf[:0], &rdec)
	default:
		return nil, fmt.Errorf("sdk: no policy registered")
	}
	return outBuf, nil
}

// CallSerial runs p natively on s through the same byte path a plugin uses
// (encode, zero-copy decode, decide, encode, decode) and returns a decision
// that owns its strings. Use it in plugin unit tests.
func CallSerial(p SerialPolicy, s *abi.SerialSnapshot) (abi.SerialDecision, error) {
	in := abi.AppendSerialSnapshot(nil, s)
	var view abi.SerialSnapshot
	if err := abi.DecodeSerialSnapshotView(in, &view); err != nil {
		return abi.SerialDecision{}, err
	}
	var d abi.SerialDecision
	p.DecideSerial(&view, &d)
	var out abi.SerialDecision
	err := abi.DecodeSerialDecision(abi.AppendSerialDecision(nil, &d), &out)
	return out, err
}

// CallReuse is CallSerial for slot-reuse policies.
func CallReuse(p ReusePolicy, r *abi.ReuseRequest) (abi.ReuseDecision, error) {
	in := abi.AppendReuseRequest(nil, r)
	var view abi.ReuseRequest
	if err := abi.DecodeReuseRequestView(in, &view); err != nil {
		return abi.ReuseDecision{}, err
	}
	var d abi.ReuseDecision
	p.DecideReuse(&view, &d)
	var out abi.ReuseDecision
	err := abi.DecodeReuseDecision(abi.AppendReuseDecision(nil, &d), &out)
	return out, err
}
