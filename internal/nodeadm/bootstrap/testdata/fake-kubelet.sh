#!/bin/sh
# A stand-in for kubelet v1.37.1 that answers as the real one does (messages copied from
# its output) to `--version` and to nodeadm's feature-gate probe
# `--feature-gates=GATE=VALUE --node-labels=kubernetes.io/nodeadm-gate-probe=x`.
# It knows RotateKubeletServerCertificate and MutableCSINodeAllocatableCount (GA, absent
# from --help), DRAFractionalCapacityRange (beta), and DynamicResourceAllocation (GA,
# locked to true). Each run appends a line to $FAKE_KUBELET_RUNS when it is set.
[ -n "$FAKE_KUBELET_RUNS" ] && echo run >> "$FAKE_KUBELET_RUNS"
if [ "$1" = "--version" ]; then
	echo "Kubernetes v1.37.1"
	exit 0
fi
setting=${1#--feature-gates=}
name=${setting%%=*}
value=${setting#*=}
echo "Flag --feature-gates has been deprecated, This parameter should be set via the config file specified by the Kubelet's --config flag." >&2
case "$name" in
RotateKubeletServerCertificate | MutableCSINodeAllocatableCount | DRAFractionalCapacityRange) ;;
DynamicResourceAllocation)
	if [ "$value" = "false" ]; then
		echo "E1127 16:30:18.916315   15765 run.go:72] \"command failed\" err=\"failed to set feature gates from initial flags-based config: cannot set feature gate DynamicResourceAllocation to false, feature is locked to true\"" >&2
		exit 1
	fi
	;;
*)
	echo "E1127 16:30:18.801015   15735 run.go:72] \"command failed\" err=\"failed to set feature gates from initial flags-based config: unrecognized feature gate: $name\"" >&2
	exit 1
	;;
esac
echo "E1127 16:30:20.017191   15825 run.go:72] \"command failed\" err=<" >&2
echo "	failed to validate kubelet flags: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [kubernetes.io/nodeadm-gate-probe]" >&2
echo " >" >&2
exit 1
