package nodejoin

import (
	"context"
	"errors"

	"github.com/nodejoin/nodejoin/internal/provider/local"
)

// simRunner runs simulated kubelets.
func (w *workers) simRunner() local.SimRunner {
	return func(context.Context, local.SimNode) error { return errors.New("simulated kubelets are not wired yet") }
}
