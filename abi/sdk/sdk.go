package sdk

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

// SerialPolicy decides for one serial group. DecideSerial appends actions to
// d (which arrives empty, with capacity kept from earlier calls). s and every
// string in it alias the SDK's input buffer: valid only during the call, so
// copy anything you keep. Appending to d and using s's strings as Run/Reason
// allocates nothing in steady state.
type SerialPolicy interface {
	DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision)
}

// Versioned is implemented by a policy that exports an older ABI version
// than abi.Version (MinVersion to abi.Version): a serial policy that reads
// nothing of version 4 (labels, parameters, history, wakes) and returns 3
// is sent the smaller version 3 snapshot, which a Go guest decodes in
// about half the time (BENCHMARKS.md "ABI version 4"). The built-ins do.
type Versioned interface {
	ABIVersion() uint32
}

// MinVersion is the oldest ABI version the SDK exports (Versioned).
const MinVersion = 3

// ReusePolicy decides which task slots of a restored run to reuse. d arrives
// reset (Fail false, no reason, no verdicts); append one verdict per slot of
// r, in order, or set Fail.
type ReusePolicy interface {
	DecideReuse(r *abi.ReuseRequest, d *abi.ReuseDecision)
}

// AllocationPolicy decides the order in which a namespace's LAUNCHED runs
// receive slots. d arrives empty; append the indices (into s.Runs) of the
// runs to try, in order, each at most once. A run left out waits for a
// later pass. s aliases the SDK's input buffer: valid only during the call.
type AllocationPolicy interface {
	DecideAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision)
}

var le = binary.LittleEndian

// guest state: all buffers are globals so the guest GC keeps them alive
// between wasmsched_input and wasmsched_decide, and reuses them across calls.
var (
	serialPolicy SerialPolicy
	reusePolicy  ReusePolicy
	allocPolicy  AllocationPolicy
	//lint:ignore U1000 read by the wasip1 exports (exports_wasip1.go)
	version uint32 = abi.Version // what wasmsched_abi_version exports

	ioBuf  []byte // [reserve | input buffer | tail], see input
	inBuf  []byte // ioBuf[reserve:], what wasmsched_input hands out
	outBuf []byte // decisions that do not fit the fast layout

	snap abi.SerialSnapshot
	sdec abi.SerialDecision
	req  abi.ReuseRequest
	rdec abi.ReuseDecision
	asnp abi.AllocationSnapshot
	adec abi.AllocationDecision
)

// Register installs the plugin's policy; call it once, from an init function
// or package-level var. p must implement exactly one of SerialPolicy,
// ReusePolicy and AllocationPolicy. It panics otherwise, which fails the
// plugin at load.
func Register(p any) {
	if serialPolicy != nil || reusePolicy != nil || allocPolicy != nil {
		panic("sdk: Register called twice")
	}
	s, isSerial := p.(SerialPolicy)
	r, isReuse := p.(ReusePolicy)
	a, isAlloc := p.(AllocationPolicy)
	version = versionOf(p)
	switch n := btoi(isSerial) + btoi(isReuse) + btoi(isAlloc); {
	case n > 1:
		panic(fmt.Sprintf("sdk: %T implements more than one of SerialPolicy, ReusePolicy and AllocationPolicy", p))
	case isSerial:
		serialPolicy = s
	case isReuse:
		reusePolicy = r
	case isAlloc:
		allocPolicy = a
	default:
		panic(fmt.Sprintf("sdk: %T implements none of SerialPolicy, ReusePolicy and AllocationPolicy", p))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// versionOf is the ABI version p exports (Versioned, else abi.Version); it
// panics on one the SDK does not implement, which fails the plugin at load.
func versionOf(p any) uint32 {
	v, ok := p.(Versioned)
	if !ok {
		return abi.Version
	}
	if n := v.ABIVersion(); n >= MinVersion && n <= abi.Version {
		return n
	}
	panic(fmt.Sprintf("sdk: %T exports ABI version %d; the SDK implements %d to %d", p, v.ABIVersion(), MinVersion, abi.Version))
}

// Kind returns the kind of the registered policy, or 0 if none is.
func Kind() abi.Kind {
	switch {
	case serialPolicy != nil:
		return abi.KindSerial
	case reusePolicy != nil:
		return abi.KindSlotReuse
	case allocPolicy != nil:
		return abi.KindAllocation
	}
	return 0
}

// input returns the guest input buffer with room for size bytes (what
// wasmsched_input exports). It returns nil if size exceeds abicodec.MaxRecordSize.
//
// The buffer sits inside a larger one: a reserve before it, where a serial
// decision's header and actions are written so that the decision record
// runs straight into the input and its run ids are references into the
// snapshot's own bytes (nothing copied), and a tail after it for any other
// string (reasons). See encodeSerialInPlace.
func input(size int) []byte {
	if size < 0 || size > abicodec.MaxRecordSize {
		return nil
	}
	if cap(inBuf) < size || cap(inBuf) == 0 {
		n := 4096
		for n < size {
			n *= 2
		}
		// one action per run record the input can hold, and then some
		reserve := abicodec.SerialDecisionHeaderSize + abicodec.ActionSize*(n/abicodec.RunSize+8)
		ioBuf = make([]byte, reserve+n+tailSize)
		inBuf = ioBuf[reserve : reserve+n : reserve+n]
	}
	return inBuf[:cap(inBuf)]
}

// tailSize is the room after the input for strings of a decision that are
// not in the input (a policy's reasons, each distinct one written once).
const tailSize = 4096

// decide decodes the first n bytes of the input buffer, runs the registered
// policy and returns the encoded decision (what wasmsched_decide exports).
// The result aliases an SDK buffer reused by the next call.
func decide(n int) ([]byte, error) {
	if n < 0 || n > len(inBuf) {
		return nil, fmt.Errorf("sdk: input length %d beyond buffer of %d bytes", n, len(inBuf))
	}
	in := inBuf[:n] // one function, not two: a call is costly in a wasm guest
	switch {
	case serialPolicy != nil:
		if err := abicodec.DecodeSerialSnapshotView(in, &snap); err != nil {
			return nil, err
		}
		sdec.Reset()
		serialPolicy.DecideSerial(&snap, &sdec)
		if out := encodeSerialInPlace(len(in)); out != nil {
			return out, nil
		}
		outBuf = abicodec.AppendSerialDecision(outBuf[:0], &sdec)
	case reusePolicy != nil:
		if err := abicodec.DecodeReuseRequestView(in, &req); err != nil {
			return nil, err
		}
		rdec.Reset()
		reusePolicy.DecideReuse(&req, &rdec)
		outBuf = abicodec.AppendReuseDecision(outBuf[:0], &rdec)
	case allocPolicy != nil:
		if err := abicodec.DecodeAllocationSnapshotView(in, &asnp); err != nil {
			return nil, err
		}
		adec.Reset()
		allocPolicy.DecideAllocation(&asnp, &adec)
		outBuf = abicodec.AppendAllocationDecision(outBuf[:0], &adec)
	default:
		return nil, fmt.Errorf("sdk: no policy registered")
	}
	return outBuf, nil
}

// CallSerial runs p natively on s through the same byte path a plugin uses
// (encode as the host encodes for this SDK's ABI version, zero-copy decode,
// decide, encode, decode) and returns a decision that owns its strings.
// Use it in plugin unit tests.
func CallSerial(p SerialPolicy, s *abi.SerialSnapshot) (abi.SerialDecision, error) {
	in := abicodec.AppendSerialSnapshotFor(nil, s, versionOf(p))
	var view abi.SerialSnapshot
	if err := abicodec.DecodeSerialSnapshotView(in, &view); err != nil {
		return abi.SerialDecision{}, err
	}
	var d abi.SerialDecision
	p.DecideSerial(&view, &d)
	var out abi.SerialDecision
	err := abicodec.DecodeSerialDecision(abicodec.AppendSerialDecision(nil, &d), &out)
	return out, err
}

// CallReuse is CallSerial for slot-reuse policies.
func CallReuse(p ReusePolicy, r *abi.ReuseRequest) (abi.ReuseDecision, error) {
	in := abicodec.AppendReuseRequest(nil, r)
	var view abi.ReuseRequest
	if err := abicodec.DecodeReuseRequestView(in, &view); err != nil {
		return abi.ReuseDecision{}, err
	}
	var d abi.ReuseDecision
	p.DecideReuse(&view, &d)
	var out abi.ReuseDecision
	err := abicodec.DecodeReuseDecision(abicodec.AppendReuseDecision(nil, &d), &out)
	return out, err
}

// CallAllocation is CallSerial for allocation policies.
func CallAllocation(p AllocationPolicy, s *abi.AllocationSnapshot) (abi.AllocationDecision, error) {
	in := abicodec.AppendAllocationSnapshot(nil, s)
	var view abi.AllocationSnapshot
	if err := abicodec.DecodeAllocationSnapshotView(in, &view); err != nil {
		return abi.AllocationDecision{}, err
	}
	var d abi.AllocationDecision
	p.DecideAllocation(&view, &d)
	var out abi.AllocationDecision
	err := abicodec.DecodeAllocationDecision(abicodec.AppendAllocationDecision(nil, &d), &out)
	return out, err
}

// encodeSerialInPlace encodes sdec around the n input bytes in ioBuf and
// returns the record, or nil if it does not fit that layout (then the caller
// encodes it the ordinary way). The record is
//
//	[header | actions] (end of the reserve) [input snapshot] [reasons] (tail)
//
// A run id that the policy took from the snapshot (the normal case) is a
// reference into the snapshot's bytes, which are part of the record: the
// ABI only requires string references to lie inside the record. Other
// strings are copied to the tail, a reason only when it differs from the
// previous action's (policies use a few constant reasons).
//
// One pass, no calls and no taken branches per action in the common case:
// in a Go wasm guest under wazero's deadline checks every taken branch costs
// an exit to the host, so bad references are accumulated arithmetically and
// acted on once.
func encodeSerialInPlace(n int) []byte {
	acts := sdec.Actions
	reserve := len(ioBuf) - cap(inBuf) - tailSize
	fixed := abicodec.SerialDecisionHeaderSize + abicodec.ActionSize*len(acts)
	if fixed > reserve || n > cap(inBuf) || sdec.Below != 0 || sdec.Wake != 0 {
		return nil // (a discard_below or a wake is encoded the ordinary way)
	}
	base := reserve - fixed
	rec := ioBuf[base:]
	inAddr := uintptr(unsafe.Pointer(unsafe.SliceData(inBuf)))
	inOff := uintptr(fixed) // the input's offset in the record
	next := fixed + n       // tail write position, relative to base
	limit := len(rec)
	le.PutUint64(rec[0:8], uint64(abicodec.TagSerialDecision)|uint64(len(acts))<<32)
	le.PutUint64(rec[8:16], 0)
	var bad uintptr
	var lastReason *byte
	lastLen, lastRef := -1, uint64(0)
	// Action records through array pointers (fixed <= reserve was checked):
	// no bounds check per field, which in a Go wasm guest is most of the
	// cost of a small loop like this one.
	first := unsafe.Pointer(&rec[abicodec.SerialDecisionHeaderSize])
	for i := range acts {
		a := &acts[i]
		ar := (*[abicodec.ActionSize]byte)(unsafe.Add(first, uintptr(i)*abicodec.ActionSize))
		// run: inside the input? rel wraps to a huge value below it
		rel := uintptr(unsafe.Pointer(unsafe.StringData(a.Run))) - inAddr
		rl := uintptr(len(a.Run))
		bad |= rel>>32 | (uintptr(n)-(rel+rl))>>63
		le.PutUint32(ar[0:4], uint32(a.Kind))
		le.PutUint64(ar[4:12], uint64(inOff+rel)&0xffffffff|uint64(rl)<<32)
		if unsafe.StringData(a.Reason) != lastReason || len(a.Reason) != lastLen {
			if limit-next < len(a.Reason) {
				return nil
			}
			copy(rec[next:], a.Reason)
			lastReason, lastLen = unsafe.StringData(a.Reason), len(a.Reason)
			lastRef = uint64(next) | uint64(len(a.Reason))<<32
			next += len(a.Reason)
		}
		le.PutUint64(ar[12:20], lastRef)
	}
	if bad != 0 {
		return nil // a run id from elsewhere (or empty): encode the ordinary way
	}
	return rec[:next]
}
