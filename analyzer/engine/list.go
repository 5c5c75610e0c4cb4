package engine

// The Engine's lists of traces (held: eviction order; pending: settle order).

// list is an intrusive doubly-linked list of traces: O(1) touch, remove and oldest-first walk
// without a container/list element allocation per trace.
type list struct {
	head, tail *traceState
	len        int
	link       func(*traceState) *elem
}

type elem struct {
	prev, next *traceState
	linked     bool
}

func (l *list) init(link func(*traceState) *elem) { l.link = link }

func (l *list) front() *traceState { return l.head }

func (l *list) next(t *traceState) *traceState { return l.link(t).next }

func (l *list) pushBack(t *traceState) {
	e := l.link(t)
	e.prev, e.next, e.linked = l.tail, nil, true
	if l.tail != nil {
		l.link(l.tail).next = t
	} else {
		l.head = t
	}
	l.tail = t
	l.len++
}

func (l *list) remove(t *traceState) {
	e := l.link(t)
	if !e.linked {
		return
	}
	if e.prev != nil {
		l.link(e.prev).next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		l.link(e.next).prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next, e.linked = nil, nil, false
	l.len--
}

func (l *list) moveToBack(t *traceState) {
	if l.tail == t {
		return
	}
	l.remove(t)
	l.pushBack(t)
}
