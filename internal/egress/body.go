package egress

import (
	"errors"
	"io"
)

// ErrResponseTooLarge is a response body longer than the bound its reader was given
// (LimitBody): a source's, or a model provider's.
var ErrResponseTooLarge = errors.New("response larger than the limit")

// LimitBody bounds a response body to limit bytes: a body of exactly limit bytes reads whole,
// and a read that finds one byte more fails with ErrResponseTooLarge, passed first through
// refuse when it is not nil (a transport that remembers its first refusal). Each read asks the
// body for no more than is left, so nothing past the bound is taken in but the one byte that
// tells a body of exactly the limit from a longer one.
func LimitBody(rc io.ReadCloser, limit int64, refuse func(error) error) io.ReadCloser {
	return &limitedBody{rc: rc, left: limit, refuse: refuse}
}

type limitedBody struct {
	rc     io.ReadCloser
	left   int64
	refuse func(error) error
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		n, err := l.rc.Read(one[:])
		if n > 0 {
			if l.refuse != nil {
				return 0, l.refuse(ErrResponseTooLarge)
			}
			return 0, ErrResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }
