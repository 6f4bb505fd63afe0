package csr

import (
	"context"

	"github.com/nodejoin/nodejoin/internal/leader"
)

// RunElected runs the controller only while this replica holds the Lease described by
// le; see leader.Run.
func (c *Controller) RunElected(ctx context.Context, le leader.Election) error {
	return leader.Run(ctx, c.Client, le, c.logger(), c.Start)
}
