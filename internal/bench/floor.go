package bench

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/pki"
	"github.com/nodejoin/nodejoin/internal/process"
)

// BaselineFloor is the floor baseline: an approver of the benchmark's own (never
// nodejoin-controller) approves and signs every kubelet CSR at once, with no check, no
// Event and no review. It is what the kubelets' own protocol costs on this machine:
// ours less the floor is the price of nodejoin's checks.
const BaselineFloor = "floor"

// floorWorkers is how many CSRs the floor approver handles at once; enough that the
// two API calls of one CSR never wait behind another's on a 2-core machine.
const floorWorkers = 16

// floorValidity is the lifetime of the floor's certificates when the CSR asks none:
// kube-controller-manager's default (--cluster-signing-duration, a year).
const floorValidity = 365 * 24 * time.Hour

// FloorApproverArgs runs the floor approver from its command line (`nodejoin bench
// floor-approver --kubeconfig F --ca-cert F --ca-key F`) until SIGTERM or SIGINT. The
// benchmark starts it as a child process, so that its CPU time is its own and not the
// simulated kubelets'.
func FloorApproverArgs(args []string) error {
	f := pflag.NewFlagSet("floor-approver", pflag.ContinueOnError)
	kubeconfig := f.String("kubeconfig", "", "the cluster's admin kubeconfig")
	caCert := f.String("ca-cert", "", "the cluster CA's certificate (PEM)")
	caKey := f.String("ca-key", "", "the cluster CA's key (PEM)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || *caCert == "" || *caKey == "" {
		return errors.New("floor-approver: --kubeconfig, --ca-cert and --ca-key are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return runFloor(ctx, *kubeconfig, *caCert, *caKey)
}

// runFloor approves and signs every kubelet CSR it sees until ctx ends.
func runFloor(ctx context.Context, kubeconfig, caCert, caKey string) error {
	ca, err := pki.LoadCA(caCert, caKey)
	if err != nil {
		return fmt.Errorf("floor-approver: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("floor-approver: %w", err)
	}
	// No client-side rate limit: the floor waits for nothing but kube-apiserver.
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Certificates().V1().CertificateSigningRequests()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	enqueue := func(obj any) {
		if c, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && floorSigns(c) && len(c.Status.Certificate) == 0 {
			q.Add(c.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	lister := inf.Lister()
	for range floorWorkers {
		go func() {
			for {
				name, shutdown := q.Get()
				if shutdown {
					return
				}
				c, err := lister.Get(name)
				if err == nil {
					err = floorIssue(ctx, client, ca, c)
				}
				if err != nil && ctx.Err() == nil {
					q.AddRateLimited(name)
				} else {
					q.Forget(name)
				}
				q.Done(name)
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// floorSigns says whether the CSR is a kubelet's: a client or a serving certificate.
func floorSigns(c *certificatesv1.CertificateSigningRequest) bool {
	return c.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName || c.Spec.SignerName == certificatesv1.KubeletServingSignerName
}

// floorIssue approves the CSR (unless it is approved already) and signs it: two API
// calls, nothing read, nothing checked.
func floorIssue(ctx context.Context, client kubernetes.Interface, ca *pki.CA, c *certificatesv1.CertificateSigningRequest) error {
	if len(c.Status.Certificate) > 0 || !floorSigns(c) {
		return nil
	}
	if !approved(c) {
		var err error
		if c, err = client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, c.Name, floorApproved(c), metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	der, err := floorSign(ca, c, time.Now())
	if err != nil {
		// A request that does not parse is left alone: the floor checks nothing, but it
		// cannot sign what is not a CSR.
		return nil //nolint:nilerr // retrying would not make it parse.
	}
	c = c.DeepCopy()
	c.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	_, err = client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return err
}

// approved reports an Approved condition on the CSR.
func approved(c *certificatesv1.CertificateSigningRequest) bool {
	return slices.ContainsFunc(c.Status.Conditions, func(x certificatesv1.CertificateSigningRequestCondition) bool {
		return x.Type == certificatesv1.CertificateApproved
	})
}

// floorApproved is a copy of the CSR with the floor's approval, which checks nothing.
func floorApproved(c *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	c = c.DeepCopy()
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "BenchFloor",
		Message: "approved without a check by the benchmark's floor approver", LastUpdateTime: metav1.Now(),
	})
	return c
}

// floorSign signs the CSR (as the floor approved it) with the CA by nodejoin's own
// kubelet signer (csr.Signer: the CSR's subject, names and usages, as
// kube-controller-manager's signer signs with the same CA files in the kcm baseline),
// with kube-controller-manager's default lifetime; it returns the certificate's DER.
func floorSign(ca *pki.CA, c *certificatesv1.CertificateSigningRequest, now time.Time) ([]byte, error) {
	if !approved(c) {
		c = floorApproved(c)
	}
	s := &csr.Signer{CA: ca, Duration: floorValidity, MaxDuration: floorValidity, ClientMaxDuration: floorValidity,
		Now: func() time.Time { return now }}
	signed, err := s.Sign(c)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(signed)
	if block == nil {
		return nil, errors.New("the signer returned no PEM certificate")
	}
	return block.Bytes, nil
}

// startFloor runs the floor approver as a child process against the run's cluster.
func (r *run) startFloor() (*process.Process, error) {
	p := r.cluster.PKI()
	argv := append(slices.Clone(r.opts.FloorCommand),
		"--kubeconfig", r.cluster.KubeconfigPath(), "--ca-cert", p.CA.Cert, "--ca-key", p.CA.Key)
	return process.Start(process.Spec{Name: "floor-approver", Argv: argv, Env: append([]string{"KUBECONFIG="}, r.opts.FloorEnv...),
		LogFile: filepath.Join(r.dir, "floor-approver.log")})
}
