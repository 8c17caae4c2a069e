package inject

import (
	"github.com/batonproxy/baton/inject/agentenv"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/batonproxy/baton/config"
)

// An agent whose HTTPS Baton terminates for some destinations
// (intercept.tls in the config) must trust Baton's CA. Baton publishes the
// CA's certificate, with the system roots, in a volume the agent's
// containers mount read-only, and the usual variables name that file.

// AnnotationInterceptTLS ("true") gives the agent's containers Baton's CA
// bundle, and in proxy mode HTTPS_PROXY: for a pod whose config lists
// destinations in intercept.tls.hosts.
const AnnotationInterceptTLS = "baton.dev/intercept-tls"

// CADir is where the bundle's volume is mounted, in the sidecar and in the
// agent's containers: the directory of the config's default bundle path.
var CADir = filepath.Dir(config.DefaultInterceptBundle)

// caVolume is the bundle's volume.
const caVolume = "baton-ca"

// trustCA adds the bundle's volume, mounts it in the agent's containers
// and points them at it.
func trustCA(spec *corev1.PodSpec, o Options) {
	size := resource.MustParse("1Mi")
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         caVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}},
	})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: caVolume, MountPath: CADir, ReadOnly: true})
		for _, name := range agentenv.TrustBundleVars {
			if !hasEnv(c, name) {
				c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: config.DefaultInterceptBundle})
			}
		}
		if o.Intercept == ModeProxy && !hasEnv(c, "HTTPS_PROXY") {
			c.Env = append(c.Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://127.0.0.1:" + strconv.Itoa(EgressPort)})
		}
	}
}
