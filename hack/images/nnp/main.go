// Command nnp prints the effective user ID it runs with. It is the setuid-root program of
// the nonewprivs image (hack/images): run by a non-root user, it reports uid 0 when the
// kernel honoured its setuid bit and the user's own uid when no_new_privs
// (allowPrivilegeEscalation: false) stopped it, which is what upstream's Security Context
// tests read from its output.
package main

import (
	"fmt"
	"os"
)

func main() {
	_, _ = fmt.Fprintf(os.Stdout, "Effective uid: %d\n", os.Geteuid())
}
