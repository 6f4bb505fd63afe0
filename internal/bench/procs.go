package bench

import (
	"os"

	"github.com/nodejoin/nodejoin/internal/controlplane"
)

// Process names in Report.CPUSeconds besides the control plane's daemons (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler).
const (
	procController = "nodejoin-controller"
	procFloor      = "floor-approver"
	// procKubelets is the benchmark's own process: the simulated kubelets, and with
	// them the local cloud and the benchmark's two watchers (Nodes and CSRs).
	procKubelets = "kubelets"
)

// procSet is the run's processes by name, each with its PIDs (two replicas are one
// name).
type procSet map[string][]int

// processes lists the run's processes now: the control plane's daemons as the cluster
// recorded them, the controller replicas or the floor approver, and this process.
func (r *run) processes() procSet {
	out := procSet{procKubelets: {os.Getpid()}}
	if s, err := controlplane.ReadState(r.cluster.StateDir()); err == nil {
		for name, id := range s.Daemons {
			out[name] = append(out[name], id.PID)
		}
	}
	for _, rep := range r.replicas {
		if !rep.killed {
			out[procController] = append(out[procController], rep.proc.PID())
		}
	}
	if r.floor != nil {
		out[procFloor] = []int{r.floor.PID()}
	}
	return out
}

// cpuByPID reads each process's CPU seconds; a process that cannot be read is left out.
func cpuByPID(ps procSet) map[int]float64 {
	out := map[int]float64{}
	for _, pids := range ps {
		for _, pid := range pids {
			if st, err := readProc(pid); err == nil {
				out[pid] = st.cpuSeconds
			}
		}
	}
	return out
}

// cpuSeconds is the CPU time each named process spent between two readings: a process
// that was there at the first reading counts its increase, one started since (a
// restarted kube-apiserver) counts all of its time; one gone by the second reading (a
// killed leader) counts nothing.
func cpuSeconds(before map[int]float64, ps procSet) map[string]float64 {
	out := map[string]float64{}
	for name, pids := range ps {
		for _, pid := range pids {
			st, err := readProc(pid)
			if err != nil {
				continue
			}
			out[name] += st.cpuSeconds - before[pid]
		}
	}
	for k, v := range out {
		out[k] = round(v, 2)
	}
	return out
}

// selfRSSMiB is this process's resident memory now, in MiB.
func selfRSSMiB() float64 {
	st, err := readProc(os.Getpid())
	if err != nil {
		return 0
	}
	return st.rssMiB
}
