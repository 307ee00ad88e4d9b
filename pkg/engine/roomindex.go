package engine

import "math/bits"

// roomIndex buckets live claims by the CPU left on their current cheapest
// type, so best fit looks only at claims with room. Each entry carries what
// is left on that type and its allocatable, so the scan reads one array.
type roomIndex struct {
	buckets [roomBuckets][]roomEntry
	bits    [roomBuckets / 64]uint64
	words   uint64 // bit w set when bits[w] is not zero
	// blockMem[b][k] is at least the free memory of every entry at
	// positions k·roomBlock … (k+1)·roomBlock−1 of bucket b: put and remove
	// raise it, pickClaim's scan of the block makes it exact. A pod with
	// more memory skips the block; claims with CPU to spare but short of
	// memory filled whole buckets at 20,000 pods.
	blockMem [roomBuckets][]int64
}

type roomEntry struct {
	n                  *node
	free               vec   // the current type's allocatable − used
	allocCPU, allocMem int64 // the current type's allocatable
}

const (
	roomBuckets = 1024
	roomStep    = 100 // milli-CPU per bucket
	roomBlock   = 32  // entries per blockMem bound
)

// roomBlocks is off only in tests, which compare with the scan of every entry.
var roomBlocks = true

func roomBucket(freeCPU int64) int {
	return int(min(max(freeCPU/roomStep, 0), roomBuckets-1))
}

func (r *roomIndex) put(n *node) {
	alloc := n.types[n.cur].alloc
	free := alloc.sub(n.used)
	b := roomBucket(free[rCPU])
	n.room, n.roomPos = b, len(r.buckets[b])
	k, bm := n.roomPos/roomBlock, r.blockMem[b]
	switch {
	case k == len(bm):
		r.blockMem[b] = append(bm, free[rMem])
	case n.roomPos%roomBlock == 0:
		bm[k] = free[rMem] // the block was empty
	default:
		bm[k] = max(bm[k], free[rMem])
	}
	r.buckets[b] = append(r.buckets[b], roomEntry{n: n, free: free, allocCPU: alloc[rCPU], allocMem: alloc[rMem]})
	r.bits[b/64] |= 1 << (b % 64)
	r.words |= 1 << (b / 64)
}

func (r *roomIndex) remove(n *node) {
	if n.room < 0 {
		return
	}
	b := r.buckets[n.room]
	last := b[len(b)-1]
	b[n.roomPos] = last
	last.n.roomPos = n.roomPos
	bm := &r.blockMem[n.room][n.roomPos/roomBlock]
	*bm = max(*bm, last.free[rMem])
	r.buckets[n.room] = b[:len(b)-1]
	if len(b) == 1 {
		if r.bits[n.room/64] &^= 1 << (n.room % 64); r.bits[n.room/64] == 0 {
			r.words &^= 1 << (n.room / 64)
		}
	}
	n.room = -1
}

// next is the first non-empty bucket ≥ b, or -1.
func (r *roomIndex) next(b int) int {
	if b >= roomBuckets {
		return -1
	}
	w := b / 64
	if word := r.bits[w] &^ (1<<(b%64) - 1); word != 0 {
		return w*64 + bits.TrailingZeros64(word)
	}
	later := r.words &^ (1<<(w+1) - 1)
	if later == 0 {
		return -1
	}
	w = bits.TrailingZeros64(later)
	return w*64 + bits.TrailingZeros64(r.bits[w])
}
