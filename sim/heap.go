package sim

// heapItem is one element of a minHeap: a value and its place in the order.
type heapItem[V any] struct {
	key float64 // smallest key first,
	seq uint64  // then smallest seq
	val V
}

// minHeap is a binary min-heap on (key, seq). Items equal in both come out
// in an order fixed by the sequence of pushes and pops (the sift-up and
// sift-down of container/heap), so a run stays a pure function of its
// inputs. The order is on fields, not on a method of V, so that the
// comparison inlines: the event loop spends much of its time here.
type minHeap[V any] []heapItem[V]

func (a minHeap[V]) less(i, j int) bool {
	if a[i].key != a[j].key {
		return a[i].key < a[j].key
	}
	return a[i].seq < a[j].seq
}

func (h *minHeap[V]) push(key float64, seq uint64, val V) {
	*h = append(*h, heapItem[V]{key: key, seq: seq, val: val})
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// pop removes the first item and returns its key and value; the heap must
// not be empty.
func (h *minHeap[V]) pop() (float64, V) {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a.less(r, l) {
			m = r
		}
		if !a.less(m, i) {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top.key, top.val
}
