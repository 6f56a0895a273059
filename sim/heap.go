package sim

// minHeap is a binary min-heap on T's before order. Elements that compare
// equal come out in an order fixed by the sequence of pushes and pops
// (the sift-up and sift-down of container/heap, without its interface
// boxing), so a run stays a pure function of its inputs.
type minHeap[T interface{ before(T) bool }] []T

func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !a[i].before(a[p]) {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// pop removes and returns the least element; the heap must not be empty.
func (h *minHeap[T]) pop() T {
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
		if r := l + 1; r < n && a[r].before(a[l]) {
			m = r
		}
		if !a[m].before(a[i]) {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
