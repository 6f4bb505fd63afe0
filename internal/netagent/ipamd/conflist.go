package ipamd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/netagent/cniplugin"
)

// ConflistName is the CNI configuration ipamd writes once it is ready. The "10-" prefix
// makes it the first configuration a runtime picks.
const ConflistName = cniplugin.ConflistName

// writeConflist writes the conflist into dir atomically (the runtime's directory watcher
// never sees half a file). The plugin's package renders it, so that what ipamd writes is
// what the plugin reads.
func writeConflist(dir string, o cniplugin.ConflistOptions) error {
	b, err := cniplugin.ConflistJSON(o)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConflistName), b, 0o644); err != nil {
		return fmt.Errorf("writing the CNI configuration: %w", err)
	}
	return nil
}

// removeConflist removes the conflist, so the runtime reports the node's network as not
// ready while ipamd is not serving.
func removeConflist(dir string) error {
	if err := os.Remove(filepath.Join(dir, ConflistName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the CNI configuration: %w", err)
	}
	return nil
}
