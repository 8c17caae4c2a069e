package inject

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Injector adds Baton to pods as its configuration says. It holds no state
// beyond the configuration, so one Injector serves concurrent requests.
type Injector struct {
	cfg Config
}

// New returns an Injector for cfg, which must be complete (see
// ParseConfig and Config.ApplyDefaults).
func New(cfg *Config) (*Injector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Injector{cfg: *cfg}, nil
}

// Volume names the injector adds.
const (
	configVolume = "baton-config"
	keyVolume    = "baton-identity"
	tlsVolume    = "baton-tls"
	// runVolume is the init container's writable /run, where iptables
	// takes its lock, on a read-only root file system.
	runVolume = "baton-init-run"
)

// noProxy is what NO_PROXY always holds in proxy mode: loopback stays
// direct (most clients never proxy it anyway).
const noProxy = "localhost,127.0.0.1,::1"

// Injected reports whether a pod already carries Baton: the status
// annotation, or a container of Baton's name.
func Injected(meta *metav1.ObjectMeta, spec *corev1.PodSpec) bool {
	if meta.Annotations[AnnotationStatus] == StatusInjected {
		return true
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if c.Name == ContainerName || c.Name == InitContainerName {
				return true
			}
		}
	}
	return false
}

// Pod injects Baton into the pod (or pod template) with meta and spec, in
// place, with the options its annotations give. fallbackName names the agent
// when neither annotation nor label does. The caller decides whether the pod
// wants injection (Wants) and that it is not injected already (Injected).
func (in *Injector) Pod(meta *metav1.ObjectMeta, spec *corev1.PodSpec, fallbackName string) (Options, error) {
	o, err := in.cfg.options(meta, fallbackName)
	if err != nil {
		return o, err
	}
	if spec.HostNetwork {
		// Baton's ports would be the node's, and in transparent mode its
		// redirects the node's too.
		return o, errors.New("the pod uses hostNetwork: Baton's listeners and redirects would be the node's")
	}
	for _, v := range spec.Volumes {
		if v.Name == configVolume || v.Name == keyVolume || v.Name == tlsVolume || v.Name == runVolume || v.Name == caVolume {
			return o, fmt.Errorf("the pod already has a volume named %s, which Baton's sidecar needs", v.Name)
		}
		if v.Name == instrumentVolume && o.instruments() {
			return o, fmt.Errorf("the pod already has a volume named %s, which Baton's instrumentation needs", v.Name)
		}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[AnnotationStatus] = StatusInjected

	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: configVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.ConfigMap},
		}},
	})
	if o.KeySecret != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         keyVolume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: o.KeySecret}},
		})
	}
	if o.TLSSecret != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         tlsVolume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: o.TLSSecret}},
		})
	}
	if o.Intercept == ModeTransparent {
		size := resource.MustParse("1Mi")
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         runVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}},
		})
	}

	// Order matters: init containers start one after the other, and a
	// native sidecar must pass its startup probe before the next starts.
	// The redirects go first, then Baton, so that the pod's own init
	// containers, and then its containers, find Baton serving.
	var first []corev1.Container
	if o.Intercept == ModeTransparent {
		first = append(first, in.iptablesContainer(o))
	}
	first = append(first, in.sidecar(o))
	if o.instruments() {
		// After Baton's and before the pod's own: nothing of the pod's
		// waits longer for Baton than it did.
		first = append(first, in.instrumentContainer(o))
	}
	spec.InitContainers = append(first, spec.InitContainers...)

	if o.Intercept == ModeProxy {
		np := noProxy
		if len(o.NoProxy) > 0 {
			np += "," + strings.Join(o.NoProxy, ",")
		}
		for i := range spec.Containers {
			c := &spec.Containers[i]
			if !hasEnv(c, "HTTP_PROXY") {
				c.Env = append(c.Env, corev1.EnvVar{Name: "HTTP_PROXY", Value: "http://127.0.0.1:" + strconv.Itoa(EgressPort)})
			}
			if !hasEnv(c, "NO_PROXY") {
				c.Env = append(c.Env, corev1.EnvVar{Name: "NO_PROXY", Value: np})
			}
		}
	}
	if o.InterceptTLS {
		trustCA(spec, o) // trust.go
	}
	// The model SDKs' base URLs, on the egress: in either mode, a call to
	// Baton's own port is served, not redirected.
	for _, name := range o.BaseURLs {
		env, value, _ := config.RouteEnv("http://127.0.0.1:"+strconv.Itoa(EgressPort), name)
		for i := range spec.Containers {
			if c := &spec.Containers[i]; !hasEnv(c, env) {
				c.Env = append(c.Env, corev1.EnvVar{Name: env, Value: value})
			}
		}
	}
	if o.instruments() {
		skipped, err := in.instrument(spec, o)
		if err != nil {
			return o, err
		}
		o.Uninstrumented = skipped
	}
	return o, nil
}

func hasEnv(c *corev1.Container, name string) bool {
	return envIndex(c, name) >= 0
}

func (in *Injector) sidecar(o Options) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	env := []corev1.EnvVar{
		{Name: "BATON_AGENT", Value: o.Agent},
		{Name: "BATON_UPSTREAM", Value: "http://127.0.0.1:" + strconv.Itoa(int(o.AgentPort))},
		// The pod's interception mode, whatever the shared config says.
		{Name: "BATON_INTERCEPT_MODE", Value: o.Intercept},
	}
	if s := in.cfg.AdminTokenSecret; s != nil {
		env = append(env, secretEnv("BATON_ADMIN_TOKEN", s))
	}
	if s := in.cfg.RedisPasswordSecret; s != nil {
		env = append(env, secretEnv("BATON_REDIS_PASSWORD", s))
	}
	env = append(env, in.cfg.Env...)
	mounts := []corev1.VolumeMount{{Name: configVolume, MountPath: ConfigDir, ReadOnly: true}}
	if o.KeySecret != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: keyVolume, MountPath: KeyDir, ReadOnly: true})
	}
	if o.TLSSecret != "" {
		// Read-only, and updated in place by the kubelet when the Secret
		// changes (a renewal): Baton reloads the files.
		mounts = append(mounts, corev1.VolumeMount{Name: tlsVolume, MountPath: TLSDir, ReadOnly: true})
	}
	if o.InterceptTLS {
		// Where Baton publishes its CA's bundle for the agent (trust.go).
		mounts = append(mounts, corev1.VolumeMount{Name: caVolume, MountPath: CADir})
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromInt32(AdminPort), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1,
		}
	}
	return corev1.Container{
		Name:            ContainerName,
		Image:           in.cfg.Image,
		ImagePullPolicy: in.cfg.ImagePullPolicy,
		Args:            []string{"serve", "--config", ConfigFile},
		RestartPolicy:   &always,
		Ports: []corev1.ContainerPort{
			{Name: "baton-ingress", ContainerPort: IngressPort, Protocol: corev1.ProtocolTCP},
			{Name: "baton-admin", ContainerPort: AdminPort, Protocol: corev1.ProtocolTCP},
		},
		Env:                      env,
		Resources:                in.cfg.Resources,
		VolumeMounts:             mounts,
		StartupProbe:             probe("/readyz", 1, 60),
		ReadinessProbe:           probe("/readyz", 5, 3),
		LivenessProbe:            probe("/healthz", 10, 3),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          securityContext(ProxyUID, true, nil),
	}
}

// iptablesContainer runs `baton iptables` once, as root with NET_ADMIN and
// NET_RAW only, to redirect the pod's traffic through Baton.
func (in *Injector) iptablesContainer(o Options) corev1.Container {
	args := []string{
		"iptables",
		"--proxy-uid", strconv.Itoa(ProxyUID),
		"--inbound-ports", strconv.Itoa(int(o.AgentPort)),
		"--egress-port", strconv.Itoa(EgressPort),
		"--ingress-port", strconv.Itoa(IngressPort),
		"--admin-port", strconv.Itoa(AdminPort),
	}
	if o.ExcludeOutboundPorts != "" {
		args = append(args, "--exclude-outbound-ports", compact(o.ExcludeOutboundPorts))
	}
	if o.ExcludeInboundPorts != "" {
		args = append(args, "--exclude-inbound-ports", compact(o.ExcludeInboundPorts))
	}
	if o.ExcludeOutboundCIDRs != "" {
		args = append(args, "--exclude-outbound-cidrs", compact(o.ExcludeOutboundCIDRs))
	}
	image := in.cfg.InitImage
	if image == "" {
		image = in.cfg.Image
	}
	return corev1.Container{
		Name:                     InitContainerName,
		Image:                    image,
		ImagePullPolicy:          in.cfg.ImagePullPolicy,
		Args:                     args,
		Resources:                in.cfg.InitResources,
		VolumeMounts:             []corev1.VolumeMount{{Name: runVolume, MountPath: "/run"}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          securityContext(0, false, []corev1.Capability{"NET_ADMIN", "NET_RAW"}),
	}
}

func securityContext(uid int64, nonRoot bool, add []corev1.Capability) *corev1.SecurityContext {
	f := false
	t := true
	return &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		RunAsNonRoot:             &nonRoot,
		ReadOnlyRootFilesystem:   &t,
		AllowPrivilegeEscalation: &f,
		Privileged:               &f,
		Capabilities:             &corev1.Capabilities{Add: add, Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func secretEnv(name string, s *SecretKey) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
			Key:                  s.Key,
		},
	}}
}
