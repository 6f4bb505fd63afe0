package nodejoin

import (
	"strings"
	"testing"
)

func TestAWSEnvOfAClusterNotRunning(t *testing.T) {
	_, err := run(t, "aws-env", "--name", "absent")
	if err == nil || !strings.Contains(err.Error(), "cluster absent") || !strings.Contains(err.Error(), "`nodejoin up --name absent`") {
		t.Errorf("error %v", err)
	}
	if _, err := run(t, "aws-env", "-o", "xml"); err == nil || !strings.Contains(err.Error(), `--output "xml"`) {
		t.Errorf("-o xml: %v", err)
	}
}
