package cloudnode

import (
	"context"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

// Inventory finds the instance behind a node name; inventory.ErrNotFound when there is
// none. inventory.File and inventory.EC2 are inventories.
type Inventory interface {
	InstanceForNode(ctx context.Context, nodeName string) (*inventory.Instance, error)
}
