// Package charts carries the Helm charts of this repository inside the binaries that
// install them: `nodejoin up --control-plane-node` installs nodejoin-controller's chart
// with the pinned helm, exactly as a user's `helm install` would, from these files.
package charts

import "embed"

// NodejoinController is charts/nodejoin-controller, rooted at "nodejoin-controller".
//
//go:embed all:nodejoin-controller
var NodejoinController embed.FS
