// Command hollow-kubelet runs the real kubelet code (node registration, node
// status and lease heartbeats, pod admission, pod workers, status manager,
// events) over a fake container runtime, as kubemark's hollow node does, with
// the node's size as flags: kubemark fixes cpu at 1, memory at 3840Mi and
// ephemeral-storage at 0, and the kubelet rewrites its Node's status every
// 10 s, so capacity cannot be patched from outside.
//
// Differences from kubemark's hollow node, and why:
//   - cpu, memory and ephemeral-storage are flags (a fake cadvisor and a stub
//     container manager that report them);
//   - events go to the API server as a real kubelet's do (kubemark drops them),
//     where /dev/kmsg can be read (the kubelet's OOM watcher needs it; it also means
//     an OOM kill anywhere on this machine is reported on every hollow node);
//   - no kubelet HTTP server and no ports: nothing here calls it, and 100
//     nodes on one machine would need 100 unique ports;
//   - all state (root dir, pod logs, the fake runtime's socket) lives under
//     --root-dir instead of fresh folders in /tmp that nothing removes;
//   - client rates are the real kubelet's defaults, not kubemark's 10 qps.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clientset "k8s.io/client-go/kubernetes"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	remote "k8s.io/cri-client/pkg"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
	utilflag "k8s.io/kubernetes/pkg/util/flag"
)

// machine is the fake cadvisor with the node's cores and memory.
type machine struct {
	cadvisortest.Fake
	cores  int
	memory uint64
}

func (m *machine) MachineInfo(logger klog.Logger) (*cadvisorapi.MachineInfo, error) {
	info, err := m.Fake.MachineInfo(logger)
	if err != nil {
		return nil, err
	}
	info.NumCores, info.MemoryCapacity = m.cores, m.memory
	return info, nil
}

// containers is the stub container manager with the node's ephemeral storage.
type containers struct {
	cm.ContainerManager
	storage resource.Quantity
}

func (c *containers) GetCapacity(logger klog.Logger, localStorageCapacityIsolation bool) v1.ResourceList {
	capacity := c.ContainerManager.GetCapacity(logger, localStorageCapacityIsolation)
	if _, reported := capacity[v1.ResourceEphemeralStorage]; reported {
		capacity[v1.ResourceEphemeralStorage] = c.storage
	}
	return capacity
}

type settings struct {
	name, kubeconfig, rootDir string
	cores                     int
	memory, storage           string
	maxPods                   int
	labels, extended          cliflag.ConfigurationMap
	taints                    []v1.Taint
	events                    bool
}

func parse() settings {
	s := settings{labels: cliflag.ConfigurationMap{}, extended: cliflag.ConfigurationMap{}}
	klog.InitFlags(nil)
	flag.StringVar(&s.name, "name", "", "node name (required)")
	flag.StringVar(&s.kubeconfig, "kubeconfig", "", "kubeconfig with this node's identity (required)")
	flag.StringVar(&s.rootDir, "root-dir", "", "folder for all of this kubelet's state (required)")
	flag.IntVar(&s.cores, "cpu", 4, "cpu capacity in whole cores")
	flag.StringVar(&s.memory, "memory", "8Gi", "memory capacity")
	flag.StringVar(&s.storage, "ephemeral-storage", "100Gi", "ephemeral-storage capacity")
	flag.IntVar(&s.maxPods, "max-pods", 110, "pods capacity")
	flag.Var(&s.labels, "node-labels", "labels to register with: k=v,...")
	flag.Var(utilflag.RegisterWithTaintsVar{Value: &s.taints}, "register-with-taints", "taints to register with: k=v:Effect,...")
	flag.Var(&s.extended, "extended-resources", "extended resources: name=quantity,...")
	flag.BoolVar(&s.events, "events", true, "write the kubelet's events to the API server")
	flag.Parse()
	return s
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hollow-kubelet: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	s := parse()
	if s.name == "" || s.kubeconfig == "" || s.rootDir == "" {
		fail("--name, --kubeconfig and --root-dir are required")
	}
	if s.cores < 1 {
		fail("--cpu must be at least 1 (whole cores: cadvisor reports a core count)")
	}
	memory, err := resource.ParseQuantity(s.memory)
	if err != nil || memory.Sign() <= 0 {
		fail("--memory %q is not a positive quantity", s.memory)
	}
	storage, err := resource.ParseQuantity(s.storage)
	if err != nil || storage.Sign() < 0 {
		fail("--ephemeral-storage %q is not a quantity", s.storage)
	}
	extended := v1.ResourceList{}
	for name, value := range s.extended {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			fail("--extended-resources %s=%q is not a quantity", name, value)
		}
		extended[v1.ResourceName(name)] = q
	}
	root, err := filepath.Abs(s.rootDir)
	if err != nil {
		fail("--root-dir: %v", err)
	}

	flags := options.NewKubeletFlags()
	flags.HostnameOverride = s.name
	flags.NodeLabels = s.labels
	flags.RootDirectory = root
	flags.CertDirectory = filepath.Join(root, "pki")
	if err := options.ValidateKubeletFlags(flags); err != nil {
		fail("%v", err)
	}
	config, err := options.NewKubeletConfiguration()
	if err != nil {
		fail("kubelet configuration: %v", err)
	}
	config.EnableServer = false
	config.Address = "127.0.0.1"
	config.ReadOnlyPort = 0
	config.MaxPods = int32(s.maxPods)
	config.RegisterNode = true
	config.RegisterWithTaints = s.taints
	config.PodLogsDir = filepath.Join(root, "pod-logs")
	config.StaticPodPath = ""
	config.CgroupsPerQOS = false // the stub container manager makes no cgroups
	config.CgroupRoot = ""
	config.EnableControllerAttachDetach = false // no volumes to attach on a hollow node
	config.ClusterDNS = []string{"10.96.0.10"}  // a real cluster has one; without it every pod gets a warning event
	config.ClusterDomain = "cluster.local"

	client, heartbeat, events := clients(s.kubeconfig, config.KubeAPIQPS, config.KubeAPIBurst,
		config.NodeStatusUpdateFrequency.Duration, time.Duration(config.NodeLeaseDurationSeconds)*time.Second,
		config.EventRecordQPS, config.EventBurst)

	ctx := context.Background()
	endpoint := "unix://" + filepath.Join(root, "runtime.sock")
	runtime := fakeremote.NewFakeRemoteRuntime()
	if err := os.MkdirAll(root, 0o750); err != nil {
		fail("%v", err)
	}
	if err := runtime.Start(endpoint); err != nil {
		fail("fake runtime: %v", err)
	}
	defer runtime.Stop()
	runtimeService, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).WithConnectionTimeout(15 * time.Second).Build(ctx)
	if err != nil {
		fail("runtime service: %v", err)
	}

	hollow := kubemark.NewHollowKubelet(flags, config, client, heartbeat,
		&machine{Fake: cadvisortest.Fake{NodeName: s.name}, cores: s.cores, memory: uint64(memory.Value())},
		runtime.ImageService, runtimeService,
		&containers{ContainerManager: cm.NewStubContainerManagerWithDevicePluginResource(extended), storage: storage})
	if s.events && kmsgReadable() {
		// A nil recorder makes RunKubelet build the real one, sending to EventClient.
		hollow.KubeletDeps.Recorder = nil
		hollow.KubeletDeps.EventClient = events
	}
	hollow.Run(ctx)
}

// kmsgReadable: with a real event recorder the kubelet starts its OOM watcher, which
// reads /dev/kmsg and fails the kubelet's start without it (an unprivileged container);
// there the fake recorder (no events) is the only way to run.
func kmsgReadable() bool {
	f, err := os.Open("/dev/kmsg")
	if err != nil {
		klog.Warningf("writing no events: the kubelet's OOM watcher needs /dev/kmsg (%v)", err)
		return false
	}
	_ = f.Close()
	return true
}

// clients are the kubelet's three API clients, configured as the kubelet configures them:
// the main one, the heartbeat (no rate limit, timeout within the lease), and events.
func clients(kubeconfig string, qps, burst int32, statusEvery, lease time.Duration, eventQPS, eventBurst int32) (
	*clientset.Clientset, *clientset.Clientset, *v1core.CoreV1Client,
) {
	base, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	base.ContentType = "application/vnd.kubernetes.protobuf"
	base.QPS, base.Burst = float32(qps), int(burst)
	client, err := clientset.NewForConfig(base)
	if err != nil {
		fail("client: %v", err)
	}
	beat := *base
	beat.QPS = -1
	beat.Timeout = min(statusEvery, lease)
	heartbeat, err := clientset.NewForConfig(&beat)
	if err != nil {
		fail("heartbeat client: %v", err)
	}
	ev := *base
	ev.QPS, ev.Burst = float32(eventQPS), int(eventBurst)
	events, err := v1core.NewForConfig(&ev)
	if err != nil {
		fail("event client: %v", err)
	}
	return client, heartbeat, events
}
