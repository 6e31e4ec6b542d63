package receipts

import (
	"container/list"
	"sync"
)

// optedSessions remembers the sessions whose initialize declared the extension, the least
// recently used first out when it holds max.
type optedSessions struct {
	max int

	mu    sync.Mutex
	order list.List // of string, the most recently used at the front
	index map[string]*list.Element
}

func newOptedSessions(max int) *optedSessions {
	return &optedSessions{max: max, index: map[string]*list.Element{}}
}

func (s *optedSessions) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.index[id]; e != nil {
		s.order.MoveToFront(e)
		return
	}
	s.index[id] = s.order.PushFront(id)
	for s.order.Len() > s.max {
		last := s.order.Back()
		s.order.Remove(last)
		delete(s.index, last.Value.(string))
	}
}

func (s *optedSessions) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index[id]
	if e != nil {
		s.order.MoveToFront(e)
	}
	return e != nil
}

func (s *optedSessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.index[id]; e != nil {
		s.order.Remove(e)
		delete(s.index, id)
	}
}
