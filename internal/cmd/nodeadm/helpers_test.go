package nodeadm

import (
	"fmt"

	"github.com/nodejoin/nodejoin/internal/process"
)

func fmtSscan(s string, id *process.Identity) (int, error) {
	return fmt.Sscan(s, &id.PID, &id.Start)
}
