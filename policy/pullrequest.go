package policy

import (
	"errors"
)

// ErrTreeTooLarge is a head not validated for its size.
var ErrTreeTooLarge = errors.New("tree too large")
