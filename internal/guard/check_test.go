package guard

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestKinds(t *testing.T) {
	runClause(t, []clauseCase{
		{"Deployment apps/v1", deployment("containers: [{name: app, image: nginx}]"), nil},
		{"Job batch/v1", job("containers: [{name: app, image: busybox}]", false), nil},
		{"Service v1", "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}", nil},
		{"ConfigMap v1", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf}\ndata: {a: b}", nil},
		{"Secret v1", "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: x}", nil},
		{"ServiceAccount v1", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}", nil},
		{"PersistentVolumeClaim v1", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}", nil},
		{"ClusterRole", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\nrules: []", []string{"kind-not-allowed@kind"}},
		{"Role", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"RoleBinding", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"CRD", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: foos.example.com}", []string{"kind-not-allowed@kind"}},
		{"Namespace", "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"Ingress", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"Route", "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"StatefulSet", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"DaemonSet", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"CronJob", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"Pod", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"Endpoints", "apiVersion: v1\nkind: Endpoints\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"PersistentVolume", "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"Deployment in an old version", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"Secret in another group", "apiVersion: example.com/v1\nkind: Secret\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
		{"kind in lower case", "apiVersion: v1\nkind: configmap\nmetadata: {name: x}", []string{"kind-not-allowed@kind"}},
	})
}

func TestKindMessages(t *testing.T) {
	got := Check(context.Background(), parse(t, "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: x}"), testContext())
	if len(got) != 1 || !strings.Contains(got[0].Message, "apiVersion: apps/v1") {
		t.Errorf("an old Deployment version should say to use apps/v1: %+v", got)
	}
	got = Check(context.Background(), parse(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}"), testContext())
	if len(got) != 1 || !strings.Contains(got[0].Message, "Deployments (apps/v1)") || got[0].Object.Kind != "ClusterRole" || got[0].Object.Name != "x" {
		t.Errorf("a refused kind should name the object and list the allowed kinds: %+v", got)
	}
}

func TestMetadataNamespace(t *testing.T) {
	runClause(t, []clauseCase{
		{"another namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: kube-system}", []string{"namespace-not-allowed@metadata.namespace"}},
		{"the platform's other namespace", deployment("containers: [{name: app, image: nginx}]") + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}", []string{"namespace-not-allowed@metadata.namespace"}},
		{"the Addon's namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: apps}", nil},
		{"no namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}", nil},
	})
}

func TestMetadataNames(t *testing.T) {
	runClause(t, []clauseCase{
		{"values Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: blog-values-7f3a}", []string{"name-reserved@metadata.name"}},
		{"values ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: blog-values-defaults}", []string{"name-reserved@metadata.name"}},
		{"generated Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: blog-generated}", []string{"name-reserved@metadata.name"}},
		{"platform pull secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: platform-pull}", []string{"name-reserved@metadata.name"}},
		{"platform claim", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: platform-media}\nspec: {resources: {requests: {storage: 1Gi}}}", []string{"name-reserved@metadata.name"}},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: c-}", []string{"name-invalid@metadata.name"}},
		{"near-miss: blog-values without suffix", "apiVersion: v1\nkind: Secret\nmetadata: {name: blog-values}", nil},
		{"near-miss: another addon's values", "apiVersion: v1\nkind: Secret\nmetadata: {name: wiki-values-1}", nil},
		{"near-miss: a Deployment named blog-generated", strings.Replace(deployment("containers: [{name: app, image: nginx}]"), "name: web", "name: blog-generated", 1), nil},
	})
}

func TestMetadataOwnerReferences(t *testing.T) {
	runClause(t, []clauseCase{
		{"owner reference", `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: platform-api, uid: 6d1c9c0e-0000-4000-8000-000000000001}]`,
			[]string{"owner-reference@metadata.ownerReferences[0]"}},
		{"owner reference in a pod template", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      ownerReferences: [{apiVersion: v1, kind: Secret, name: x, uid: 6d1c9c0e-0000-4000-8000-000000000002}]
    spec:
      containers: [{name: app, image: nginx}]`,
			[]string{"owner-reference@spec.template.metadata.ownerReferences[0]"}},
		{"owner reference to another Addon", `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  ownerReferences: [{apiVersion: capstan.dev/v1alpha1, kind: Addon, name: wiki, uid: 6d1c9c0e-0000-4000-8000-000000000003}]`,
			[]string{"owner-reference@metadata.ownerReferences[0]"}},
		{"near-miss: the owner reference Capstan sets to this Addon", `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  ownerReferences: [{apiVersion: capstan.dev/v1alpha1, kind: Addon, name: blog, uid: 6d1c9c0e-0000-4000-8000-000000000004, controller: true}]`, nil},
		{"near-miss: labels and annotations", `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  labels: {app.kubernetes.io/part-of: platform-api}
  annotations: {owner: platform-api}`, nil},
	})
}

func TestServiceAccountTokens(t *testing.T) {
	pod := func(s string) string { return deployment(s) }
	runClause(t, []clauseCase{
		{"token Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: tok, annotations: {kubernetes.io/service-account.name: default}}\ntype: kubernetes.io/service-account-token",
			[]string{"service-account-token@type"}},
		{"automount on the pod", pod("automountServiceAccountToken: true\ncontainers: [{name: app, image: nginx}]"),
			[]string{"service-account-token@spec.template.spec.automountServiceAccountToken"}},
		{"automount on the ServiceAccount", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\nautomountServiceAccountToken: true",
			[]string{"service-account-token@automountServiceAccountToken"}},
		{"projected token", pod(`containers: [{name: app, image: nginx}]
volumes:
- name: token
  projected:
    sources: [{serviceAccountToken: {path: token, expirationSeconds: 3600}}]`),
			[]string{"service-account-token@spec.template.spec.volumes[0].projected.sources[0].serviceAccountToken"}},
		{"near-miss: opaque Secret with the annotation", "apiVersion: v1\nkind: Secret\nmetadata: {name: tok, annotations: {kubernetes.io/service-account.name: default}}\ntype: Opaque", nil},
		{"near-miss: automount false", pod("automountServiceAccountToken: false\ncontainers: [{name: app, image: nginx}]") +
			"---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\nautomountServiceAccountToken: false", nil},
	})
}

func TestServices(t *testing.T) {
	svc := func(spec string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n" + indent(spec, 2)
	}
	runClause(t, []clauseCase{
		{"NodePort", svc("type: NodePort\nports: [{port: 80}]"), []string{"service-type@spec.type"}},
		{"LoadBalancer", svc("type: LoadBalancer\nports: [{port: 80}]"), []string{"service-type@spec.type"}},
		{"ExternalName", svc("type: ExternalName\nexternalName: db.example.com"), []string{"service-type@spec.type", "service-type@spec.externalName"}},
		{"externalIPs", svc("type: ClusterIP\nexternalIPs: [198.51.100.7]\nports: [{port: 80}]"), []string{"external-ips@spec.externalIPs"}},
		{"nodePort on ClusterIP", svc("ports: [{name: http, port: 80, nodePort: 30080}]"), []string{"service-type@spec.ports[0].nodePort"}},
		{"near-miss: headless ClusterIP", svc("type: ClusterIP\nclusterIP: None\nports: [{port: 80}]"), nil},
		{"near-miss: no type", svc("ports: [{port: 80, targetPort: http}]\nselector: {app: web}"), nil},
	})
}

func TestServiceAnnotations(t *testing.T) {
	svc := func(ann string) string {
		return "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  annotations:\n" + indent(ann, 4) + "\nspec: {ports: [{port: 80}]}"
	}
	runClause(t, []clauseCase{
		{"Tailscale expose", svc("tailscale.com/expose: \"true\"\ntailscale.com/hostname: blog"),
			[]string{"annotation-not-allowed@metadata.annotations[tailscale.com/expose]", "annotation-not-allowed@metadata.annotations[tailscale.com/hostname]"}},
		{"Cilium global service", svc("service.cilium.io/global: \"true\"\nservice.cilium.io/shared: \"true\""),
			[]string{"annotation-not-allowed@metadata.annotations[service.cilium.io/global]", "annotation-not-allowed@metadata.annotations[service.cilium.io/shared]"}},
		{"Cilium's older keys", svc("io.cilium/global-service: \"true\""), []string{"annotation-not-allowed@metadata.annotations[io.cilium/global-service]"}},
		{"ExternalDNS name", svc("external-dns.alpha.kubernetes.io/hostname: login.platform.example.com"),
			[]string{"annotation-not-allowed@metadata.annotations[external-dns.alpha.kubernetes.io/hostname]"}},
		{"near-miss: other annotations", svc("prometheus.io/scrape: \"true\"\nservice.cilium.io/affinity: local\nexample.com/tailscale.com/expose: \"true\""), nil},
	})
}

func TestPodTemplateAnnotations(t *testing.T) {
	const app = "containers: [{name: app, image: nginx}]"
	hookJob := `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {helm.sh/hook: pre-upgrade}
spec:
  template:
    metadata:
      annotations: {karpenter.sh/do-not-disrupt: "true"}
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: busybox}]
`
	runClause(t, []clauseCase{
		{"not safe to evict", deploymentWithAnnotations(`cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`, app),
			[]string{"annotation-not-allowed@spec.template.metadata.annotations[cluster-autoscaler.kubernetes.io/safe-to-evict]"}},
		{"safe to evict in another spelling", deploymentWithAnnotations(`cluster-autoscaler.kubernetes.io/safe-to-evict: "False"`, app),
			[]string{"annotation-not-allowed@spec.template.metadata.annotations[cluster-autoscaler.kubernetes.io/safe-to-evict]"}},
		{"do not disrupt", deploymentWithAnnotations(`karpenter.sh/do-not-disrupt: "true"`, app),
			[]string{"annotation-not-allowed@spec.template.metadata.annotations[karpenter.sh/do-not-disrupt]"}},
		{"do not evict, on a hook Job", strings.Replace(hookJob, "do-not-disrupt", "do-not-evict", 1),
			[]string{"annotation-not-allowed@spec.template.metadata.annotations[karpenter.sh/do-not-evict]"}},
		{"do not disrupt, on a hook Job", hookJob,
			[]string{"annotation-not-allowed@spec.template.metadata.annotations[karpenter.sh/do-not-disrupt]"}},
		{"near-miss: safe to evict, and on the Deployment only", strings.Replace(deploymentWithAnnotations(`cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`, app),
			"  name: web\n", "  name: web\n  annotations: {karpenter.sh/do-not-disrupt: \"true\"}\n", 1), nil},
	})
}

func TestDeniedAnnotationMessage(t *testing.T) {
	vs := Check(context.Background(), parse(t, deploymentWithAnnotations(`cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`, "containers: [{name: app, image: nginx}]")), testContext())
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "cluster autoscaler") || !strings.Contains(vs[0].Message, `remove it, or set it to "true"`) {
		t.Fatalf("the message should say what the annotation does and how to fix it: %+v", vs)
	}
}

func TestClaims(t *testing.T) {
	pvc := func(name, spec string) string {
		return "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: " + name + "}\nspec:\n" + indent("accessModes: [ReadWriteOnce]\nresources: {requests: {storage: 1Gi}}\n"+spec, 2) + "\n"
	}
	runClause(t, []clauseCase{
		{"volumeName", pvc("data", "volumeName: pv-platform-db"), []string{"claim-binding@spec.volumeName"}},
		{"selector", pvc("data", "selector: {matchLabels: {app: platform}}"), []string{"claim-binding@spec.selector"}},
		{"snapshot data source", pvc("data", "dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: platform-db-snap}"),
			[]string{"claim-data-source@spec.dataSource"}},
		{"clone of a claim the chart does not render", pvc("data", "dataSource: {kind: PersistentVolumeClaim, name: platform-db}"),
			[]string{"claim-data-source@spec.dataSource"}},
		{"clone of a platform claim", pvc("data", "dataSource: {kind: PersistentVolumeClaim, name: platform-media}"),
			[]string{"claim-data-source@spec.dataSource"}},
		{"dataSourceRef to another namespace", pvc("seed", "") + "---\n" + pvc("data", "dataSourceRef: {kind: PersistentVolumeClaim, name: seed, namespace: other}"),
			[]string{"claim-data-source@spec.dataSourceRef"}},
		{"populator", pvc("data", "dataSourceRef: {apiGroup: populator.example.com, kind: Dump, name: d}"),
			[]string{"claim-data-source@spec.dataSourceRef"}},
		{"empty storage class", pvc("data", "storageClassName: \"\""), []string{"claim-binding@spec.storageClassName"}},
		{"empty storage class in the beta annotation", strings.Replace(pvc("data", "storageClassName: fast"), "metadata: {name: data}",
			"metadata: {name: data, annotations: {volume.beta.kubernetes.io/storage-class: \"\"}}", 1),
			[]string{"claim-binding@metadata.annotations[volume.beta.kubernetes.io/storage-class]"}},
		{"a node picked for the volume", strings.Replace(pvc("data", "storageClassName: fast"), "metadata: {name: data}",
			"metadata: {name: data, annotations: {volume.kubernetes.io/selected-node: cp-0, volume.alpha.kubernetes.io/selected-node: cp-0}}", 1),
			[]string{"node-name@metadata.annotations[volume.alpha.kubernetes.io/selected-node]", "node-name@metadata.annotations[volume.kubernetes.io/selected-node]"}},
		{"near-miss: storage class only", pvc("data", "storageClassName: fast"), nil},
		{"near-miss: storage class in the beta annotation", strings.Replace(pvc("data", ""), "metadata: {name: data}",
			"metadata: {name: data, annotations: {volume.beta.kubernetes.io/storage-class: fast}}", 1), nil},
		{"near-miss: clone of the chart's own claim", pvc("seed", "") + "---\n" + pvc("data", "dataSource: {kind: PersistentVolumeClaim, name: seed}\ndataSourceRef: {kind: PersistentVolumeClaim, name: seed}"), nil},
	})
}

// podCases are the pod clauses. Each runs in a Deployment, a Job and a hook
// Job, with the same paths.
var podCases = map[string][]clauseCase{
	"host": {
		{"hostPath", "containers: [{name: app, image: nginx}]\nvolumes: [{name: root, hostPath: {path: /}}]", []string{"host-path@spec.template.spec.volumes[0].hostPath"}},
		{"hostPort", "containers: [{name: app, image: nginx, ports: [{containerPort: 80, hostPort: 80}]}]", []string{"host-port@spec.template.spec.containers[0].ports[0].hostPort"}},
		{"hostPort on an init container", "initContainers: [{name: init, image: busybox, ports: [{containerPort: 53, hostPort: 53}]}]\ncontainers: [{name: app, image: nginx}]", []string{"host-port@spec.template.spec.initContainers[0].ports[0].hostPort"}},
		{"hostNetwork", "hostNetwork: true\ncontainers: [{name: app, image: nginx}]", []string{"host-namespace@spec.template.spec.hostNetwork"}},
		{"hostPID and hostIPC", "hostPID: true\nhostIPC: true\ncontainers: [{name: app, image: nginx}]", []string{"host-namespace@spec.template.spec.hostPID", "host-namespace@spec.template.spec.hostIPC"}},
		{"Windows host process", "securityContext: {windowsOptions: {hostProcess: true}}\ncontainers: [{name: app, image: nginx}]", []string{"host-process@spec.template.spec.securityContext.windowsOptions.hostProcess"}},
		{"near-miss: container port only, host namespaces false", "hostNetwork: false\nhostPID: false\ncontainers: [{name: app, image: nginx, ports: [{containerPort: 80}]}]\nvolumes: [{name: tmp, emptyDir: {}}]", nil},
	},
	"probe host": {
		{"liveness httpGet to the metadata address", "containers: [{name: app, image: nginx, livenessProbe: {httpGet: {host: 169.254.169.254, path: /latest/meta-data/, port: 80}}}]",
			[]string{"probe-host@spec.template.spec.containers[0].livenessProbe.httpGet.host"}},
		{"readiness tcpSocket to the node's loopback", "containers: [{name: app, image: nginx, readinessProbe: {tcpSocket: {host: 127.0.0.1, port: 10250}}}]",
			[]string{"probe-host@spec.template.spec.containers[0].readinessProbe.tcpSocket.host"}},
		{"lifecycle handlers", "containers: [{name: app, image: nginx, lifecycle: {postStart: {httpGet: {host: 10.96.0.1, port: 443, scheme: HTTPS, httpHeaders: [{name: Host, value: kubernetes}]}}, preStop: {tcpSocket: {host: localhost, port: 2379}}}}]",
			[]string{"probe-host@spec.template.spec.containers[0].lifecycle.postStart.httpGet.host",
				"probe-host@spec.template.spec.containers[0].lifecycle.preStop.tcpSocket.host"}},
		{"init container probe", "initContainers: [{name: sidecar, image: envoy, restartPolicy: Always, readinessProbe: {httpGet: {host: 169.254.169.254, port: 80}}}]\ncontainers: [{name: app, image: nginx}]",
			[]string{"probe-host@spec.template.spec.initContainers[0].readinessProbe.httpGet.host"}},
		{"ephemeral container probe", "containers: [{name: app, image: nginx}]\nephemeralContainers: [{name: debug, image: busybox, livenessProbe: {tcpSocket: {host: 169.254.169.254, port: 80}}}]",
			[]string{"probe-host@spec.template.spec.ephemeralContainers[0].livenessProbe.tcpSocket.host"}},
		{"near-miss: probes and handlers to the pod's own IP", `containers:
- name: app
  image: nginx
  livenessProbe: {httpGet: {path: /healthz, port: 8080, httpHeaders: [{name: Host, value: app.example.com}, {name: X-Forwarded-Host, value: example.com}]}}
  readinessProbe: {tcpSocket: {port: 8080, host: ""}}
  startupProbe: {grpc: {port: 9090}}
  lifecycle:
    postStart: {exec: {command: [touch, /tmp/ready]}}
    preStop: {httpGet: {path: /drain, port: 8080}}`, nil},
	},
	"root and privileged": {
		{"privileged", "containers: [{name: app, image: nginx, securityContext: {privileged: true}}]", []string{"privileged@spec.template.spec.containers[0].securityContext.privileged"}},
		{"pod runAsUser 0", "securityContext: {runAsUser: 0}\ncontainers: [{name: app, image: nginx}]", []string{"run-as-root@spec.template.spec.securityContext.runAsUser"}},
		{"pod runAsNonRoot false", "securityContext: {runAsNonRoot: false}\ncontainers: [{name: app, image: nginx}]", []string{"run-as-root@spec.template.spec.securityContext.runAsNonRoot"}},
		{"container runAsUser 0", "containers: [{name: app, image: nginx, securityContext: {runAsUser: 0}}]", []string{"run-as-root@spec.template.spec.containers[0].securityContext.runAsUser"}},
		{"init container runAsNonRoot false", "initContainers: [{name: chown, image: busybox, securityContext: {runAsNonRoot: false}}]\ncontainers: [{name: app, image: nginx}]", []string{"run-as-root@spec.template.spec.initContainers[0].securityContext.runAsNonRoot"}},
		{"ephemeral container privileged", "containers: [{name: app, image: nginx}]\nephemeralContainers: [{name: debug, image: busybox, securityContext: {privileged: true}}]", []string{"privileged@spec.template.spec.ephemeralContainers[0].securityContext.privileged"}},
		{"near-miss: runAsUser 1000, privileged false", "securityContext: {runAsUser: 1000, runAsGroup: 0, runAsNonRoot: true}\ncontainers: [{name: app, image: nginx, securityContext: {privileged: false, runAsUser: 1000}}]", nil},
	},
	"escalation and capabilities": {
		{"allowPrivilegeEscalation", "containers: [{name: app, image: nginx, securityContext: {allowPrivilegeEscalation: true}}]", []string{"privilege-escalation@spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation"}},
		{"added capability", "containers: [{name: app, image: nginx, securityContext: {capabilities: {add: [NET_BIND_SERVICE]}}}]", []string{"capabilities-added@spec.template.spec.containers[0].securityContext.capabilities.add"}},
		{"added capability on an init container", "initContainers: [{name: sysctl, image: busybox, securityContext: {capabilities: {add: [SYS_ADMIN, NET_ADMIN]}}}]\ncontainers: [{name: app, image: nginx}]", []string{"capabilities-added@spec.template.spec.initContainers[0].securityContext.capabilities.add"}},
		{"near-miss: escalation false, capabilities dropped", "containers: [{name: app, image: nginx, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: []}}}]", nil},
	},
	"security profiles": {
		{"pod seccomp Unconfined", "securityContext: {seccompProfile: {type: Unconfined}}\ncontainers: [{name: app, image: nginx}]", []string{"seccomp-unconfined@spec.template.spec.securityContext.seccompProfile.type"}},
		{"container seccomp Unconfined", "containers: [{name: app, image: nginx, securityContext: {seccompProfile: {type: Unconfined}}}]", []string{"seccomp-unconfined@spec.template.spec.containers[0].securityContext.seccompProfile.type"}},
		{"container AppArmor Unconfined", "containers: [{name: app, image: nginx, securityContext: {appArmorProfile: {type: Unconfined}}}]", []string{"apparmor-unconfined@spec.template.spec.containers[0].securityContext.appArmorProfile.type"}},
		{"pod AppArmor Unconfined", "securityContext: {appArmorProfile: {type: Unconfined}}\ncontainers: [{name: app, image: nginx}]", []string{"apparmor-unconfined@spec.template.spec.securityContext.appArmorProfile.type"}},
		{"SELinux super-privileged type", "securityContext: {seLinuxOptions: {type: spc_t}}\ncontainers: [{name: app, image: nginx}]", []string{"selinux-options@spec.template.spec.securityContext.seLinuxOptions"}},
		{"unmasked /proc", "containers: [{name: app, image: nginx, securityContext: {procMount: Unmasked}}]", []string{"proc-mount@spec.template.spec.containers[0].securityContext.procMount"}},
		{"near-miss: RuntimeDefault and Localhost", "securityContext: {seccompProfile: {type: RuntimeDefault}, appArmorProfile: {type: RuntimeDefault}, seLinuxOptions: {level: \"s0:c123,c456\"}}\ncontainers: [{name: app, image: nginx, securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/app.json}, procMount: Default}}]", nil},
	},
	"sysctls": {
		{"safe sysctl", "securityContext: {sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: \"0\"}]}\ncontainers: [{name: app, image: nginx}]", []string{"sysctls@spec.template.spec.securityContext.sysctls"}},
		{"unsafe sysctl", "securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: \"1\"}]}\ncontainers: [{name: app, image: nginx}]", []string{"sysctls@spec.template.spec.securityContext.sysctls"}},
		{"near-miss: empty sysctls", "securityContext: {sysctls: []}\ncontainers: [{name: app, image: nginx}]", nil},
	},
	"control plane": {
		{"nodeSelector control-plane", "nodeSelector: {node-role.kubernetes.io/control-plane: \"\"}\ncontainers: [{name: app, image: nginx}]", []string{"control-plane-placement@spec.template.spec.nodeSelector[node-role.kubernetes.io/control-plane]"}},
		{"nodeSelector master", "nodeSelector: {node-role.kubernetes.io/master: \"true\"}\ncontainers: [{name: app, image: nginx}]", []string{"control-plane-placement@spec.template.spec.nodeSelector[node-role.kubernetes.io/master]"}},
		{"required node affinity", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}, {key: node-role.kubernetes.io/control-plane, operator: Exists}]`,
			[]string{"control-plane-placement@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1]"}},
		{"preferred node affinity", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {matchExpressions: [{key: node-role.kubernetes.io/master, operator: In, values: [""]}]}`,
			[]string{"control-plane-placement@spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]"}},
		{"toleration control-plane", "containers: [{name: app, image: nginx}]\ntolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"toleration master", "containers: [{name: app, image: nginx}]\ntolerations: [{key: node-role.kubernetes.io/master, effect: NoSchedule}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"toleration of everything", "containers: [{name: app, image: nginx}]\ntolerations: [{operator: Exists}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"nodeSelector etcd", "nodeSelector: {node-role.kubernetes.io/etcd: \"true\"}\ncontainers: [{name: app, image: nginx}]", []string{"control-plane-placement@spec.template.spec.nodeSelector[node-role.kubernetes.io/etcd]"}},
		{"node affinity Exists on etcd", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: node-role.kubernetes.io/etcd, operator: Exists}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {matchExpressions: [{key: node-role.kubernetes.io/etcd, operator: In, values: ["true"]}]}`,
			[]string{"control-plane-placement@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]",
				"control-plane-placement@spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]"}},
		{"toleration etcd", "containers: [{name: app, image: nginx}]\ntolerations: [{key: node-role.kubernetes.io/etcd, operator: Exists, effect: NoExecute}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"RKE1's control plane", "nodeSelector: {node-role.kubernetes.io/controlplane: \"true\"}\ncontainers: [{name: app, image: nginx}]\ntolerations: [{key: node-role.kubernetes.io/controlplane, operator: Exists}]",
			[]string{"control-plane-placement@spec.template.spec.nodeSelector[node-role.kubernetes.io/controlplane]", "control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"toleration etcd by value", "containers: [{name: app, image: nginx}]\ntolerations: [{key: node-role.kubernetes.io/etcd, operator: Equal, value: \"true\"}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"toleration of CriticalAddonsOnly", "containers: [{name: app, image: nginx}]\ntolerations: [{key: CriticalAddonsOnly, operator: Exists}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"toleration of CriticalAddonsOnly by value", "containers: [{name: app, image: nginx}]\ntolerations: [{key: CriticalAddonsOnly, operator: Equal, value: \"true\", effect: NoExecute}]", []string{"control-plane-placement@spec.template.spec.tolerations[0]"}},
		{"nodeName", "nodeName: cp-0\ncontainers: [{name: app, image: nginx}]", []string{"node-name@spec.template.spec.nodeName"}},
		{"node affinity on a node's name", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [cp-0]}]`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0]"}},
		{"preferred node affinity on a node's name", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {matchFields: [{key: metadata.name, operator: In, values: [cp-0]}]}`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0]"}},
		{"nodeSelector on a node's hostname", "nodeSelector: {kubernetes.io/hostname: cp-0}\ncontainers: [{name: app, image: nginx}]", []string{"node-name@spec.template.spec.nodeSelector[kubernetes.io/hostname]"}},
		{"node affinity on a node's hostname", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}, {key: kubernetes.io/hostname, operator: In, values: [cp-0]}]`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1]"}},
		{"preferred node affinity on a node's hostname", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [cp-0]}]}`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]"}},
		{"nodeSelector on k3s's hostname label", "nodeSelector: {k3s.io/hostname: cp-0}\ncontainers: [{name: app, image: nginx}]", []string{"node-name@spec.template.spec.nodeSelector[k3s.io/hostname]"}},
		{"nodeSelector on k3s's address labels", "nodeSelector: {k3s.io/internal-ip: 10.0.0.1, k3s.io/external-ip: 203.0.113.1}\ncontainers: [{name: app, image: nginx}]",
			[]string{"node-name@spec.template.spec.nodeSelector[k3s.io/external-ip]", "node-name@spec.template.spec.nodeSelector[k3s.io/internal-ip]"}},
		{"node affinity on k3s's hostname label", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: k3s.io/hostname, operator: In, values: [cp-0]}]`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"}},
		{"preferred node affinity on k3s's internal address", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {matchExpressions: [{key: k3s.io/internal-ip, operator: In, values: [10.0.0.1]}]}`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]"}},
		{"node affinity Gt on a node's hostname", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: Gt, values: ["1"]}]`,
			[]string{"node-name@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"}},
		{"near-miss: Exists on a node's hostname names no node", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: Exists}, {key: k3s.io/hostname, operator: Exists}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 1
      preference: {matchExpressions: [{key: k3s.io/internal-ip, operator: Exists}, {key: k3s.io/external-ip, operator: DoesNotExist}]}`, nil},
		{"near-miss: keep off the control plane", `containers: [{name: app, image: nginx}]
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: addons, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}, {key: node-role.kubernetes.io/master, operator: NotIn, values: [""]}, {key: node-role.kubernetes.io/etcd, operator: DoesNotExist}]`, nil},
		// NOTE: NotIn every other node's name picks the one left, as In
		// does: a tenant reads its nodes' names from its own pods.
		{"node affinity NotIn the other nodes' names", `containers: [{name: app, image: nginx}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: NotIn, values: [agent-1, agent-2]}]
      - matchFields: [{key: metadata.name, operator: NotIn, values: [agent-1, agent-2]}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      preference: {matchExpressions: [{key: k3s.io/hostname, operator: NotIn, values: [agent-1, agent-2]}]}`,
			[]string{
				"node-name@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]",
				"node-name@spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchFields[0]",
				"node-name@spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]",
			}},
		{"near-miss: spread over nodes by hostname", `containers: [{name: app, image: nginx}]
topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 1
      podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}`, nil},
	},
	"pod affinity": {
		{"required affinity to kube-system's pods", `containers: [{name: app, image: nginx}]
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - {topologyKey: kubernetes.io/hostname, namespaces: [kube-system], labelSelector: {matchLabels: {component: kube-apiserver}}}`,
			[]string{"pod-affinity-namespace@spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces[0]"}},
		{"required affinity to pods of every namespace", `containers: [{name: app, image: nginx}]
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - {topologyKey: kubernetes.io/hostname, namespaceSelector: {}, labelSelector: {matchLabels: {k8s-app: kube-dns}}}`,
			[]string{"pod-affinity-namespace@spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector"}},
		{"preferred affinity by a namespace selector", `containers: [{name: app, image: nginx}]
affinity:
  podAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm: {topologyKey: kubernetes.io/hostname, namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, labelSelector: {matchLabels: {tier: control-plane}}}`,
			[]string{"pod-affinity-namespace@spec.template.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaceSelector"}},
		{"preferred affinity to the own and another namespace", `containers: [{name: app, image: nginx}]
affinity:
  podAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 1
      podAffinityTerm: {topologyKey: kubernetes.io/hostname, namespaces: [apps, team-b], labelSelector: {matchLabels: {app: db}}}`,
			[]string{"pod-affinity-namespace@spec.template.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaces[1]"}},
		{"required anti-affinity to pods of every namespace", `containers: [{name: app, image: nginx}]
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - {topologyKey: kubernetes.io/os, namespaceSelector: {}, labelSelector: {matchExpressions: [{key: batch.kubernetes.io/job-name, operator: Exists}]}}
    - {topologyKey: kubernetes.io/hostname, namespaces: [kube-system], labelSelector: {matchLabels: {k8s-app: kube-dns}}}`,
			[]string{"pod-affinity-namespace@spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector",
				"pod-affinity-namespace@spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].namespaces[0]"}},
		{"near-miss: affinity and anti-affinity to pods of the own namespace, preferred anti-affinity to any", `containers: [{name: app, image: nginx}]
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: cache}}}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 1
      podAffinityTerm: {topologyKey: topology.kubernetes.io/zone, namespaces: [apps], labelSelector: {matchLabels: {app: db}}}
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - {topologyKey: kubernetes.io/hostname, namespaces: [apps], labelSelector: {matchLabels: {app: web}}}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 1
      podAffinityTerm: {topologyKey: kubernetes.io/hostname, namespaceSelector: {}, labelSelector: {matchLabels: {app: noisy}}}`, nil},
	},
	"scheduling": {
		{"system priority class", "priorityClassName: system-node-critical\ncontainers: [{name: app, image: nginx}]", []string{"priority-class@spec.template.spec.priorityClassName"}},
		{"cluster-critical priority class", "priorityClassName: system-cluster-critical\ncontainers: [{name: app, image: nginx}]", []string{"priority-class@spec.template.spec.priorityClassName"}},
		{"another scheduler", "schedulerName: my-scheduler\ncontainers: [{name: app, image: nginx}]", []string{"scheduler-name@spec.template.spec.schedulerName"}},
		{"runtime class", "runtimeClassName: runc\ncontainers: [{name: app, image: nginx}]", []string{"runtime-class@spec.template.spec.runtimeClassName"}},
		{"an hour's grace", "terminationGracePeriodSeconds: 3600\ncontainers: [{name: app, image: nginx, lifecycle: {preStop: {sleep: {seconds: 3600}}}}]", []string{"termination-grace-period@spec.template.spec.terminationGracePeriodSeconds"}},
		{"near-miss: the defaults named, a platform class, five minutes' grace", "priorityClassName: tenant-high\nschedulerName: default-scheduler\nterminationGracePeriodSeconds: 300\ncontainers: [{name: app, image: nginx}]", nil},
	},
	"volume types": {
		{"nfs", "containers: [{name: app, image: nginx}]\nvolumes: [{name: share, nfs: {server: nfs.internal, path: /export}}]", []string{"volume-type-not-allowed@spec.template.spec.volumes[0].nfs"}},
		{"csi", "containers: [{name: app, image: nginx}]\nvolumes: [{name: s, csi: {driver: secrets-store.csi.k8s.io}}]", []string{"volume-type-not-allowed@spec.template.spec.volumes[0].csi"}},
		{"ephemeral inline claim", `containers: [{name: app, image: nginx}]
volumes:
- name: scratch
  ephemeral:
    volumeClaimTemplate:
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}`, []string{"volume-type-not-allowed@spec.template.spec.volumes[0].ephemeral"}},
		{"image volume", "containers: [{name: app, image: nginx}]\nvolumes: [{name: tools, image: {reference: busybox}}]", []string{"volume-type-not-allowed@spec.template.spec.volumes[0].image"}},
		{"gitRepo", "containers: [{name: app, image: nginx}]\nvolumes: [{name: src, gitRepo: {repository: \"https://example.com/r.git\"}}]", []string{"volume-type-not-allowed@spec.template.spec.volumes[0].gitRepo"}},
		{"two sources in one volume", "containers: [{name: app, image: nginx}]\nvolumes: [{name: x, emptyDir: {}, hostPath: {path: /var/run}}]", []string{"host-path@spec.template.spec.volumes[0].hostPath"}},
		{"projected cluster trust bundle", "containers: [{name: app, image: nginx}]\nvolumes: [{name: ca, projected: {sources: [{clusterTrustBundle: {name: ca, path: ca.pem}}]}}]", []string{"volume-type-not-allowed@spec.template.spec.volumes[0].projected.sources[0].clusterTrustBundle"}},
		{"device claims", "containers: [{name: app, image: nginx}]\nresourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]", []string{"resource-claims@spec.template.spec.resourceClaims"}},
		{"near-miss: every allowed type", `containers: [{name: app, image: nginx}]
volumes:
- {name: a, emptyDir: {medium: Memory}}
- {name: b, configMap: {name: conf}}
- {name: c, secret: {secretName: creds}}
- {name: d, downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}}
- {name: e, persistentVolumeClaim: {claimName: data}}
- {name: f, projected: {sources: [{configMap: {name: conf}}, {secret: {name: creds}}, {downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}]}}
- {name: g}`, nil},
	},
	"references": {
		{"env from a platform Secret", "containers: [{name: app, image: nginx, env: [{name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: platform-db, key: password}}}]}]",
			[]string{"reference-not-rendered@spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name"}},
		{"env from a ConfigMap", "containers: [{name: app, image: nginx, env: [{name: X, valueFrom: {configMapKeyRef: {name: platform-settings, key: x, optional: true}}}]}]",
			[]string{"reference-not-rendered@spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef.name"}},
		{"envFrom", "initContainers: [{name: init, image: busybox, envFrom: [{secretRef: {name: platform-admin}}, {configMapRef: {name: other}}]}]\ncontainers: [{name: app, image: nginx}]",
			[]string{"reference-not-rendered@spec.template.spec.initContainers[0].envFrom[0].secretRef.name", "reference-not-rendered@spec.template.spec.initContainers[0].envFrom[1].configMapRef.name"}},
		{"volumes", "containers: [{name: app, image: nginx}]\nvolumes: [{name: a, secret: {secretName: platform-tls}}, {name: b, configMap: {name: platform-conf}}, {name: c, persistentVolumeClaim: {claimName: platform-db}}, {name: d, projected: {sources: [{secret: {name: x}}, {configMap: {name: z}}]}}]",
			[]string{"reference-not-rendered@spec.template.spec.volumes[0].secret.secretName", "reference-not-rendered@spec.template.spec.volumes[1].configMap.name",
				"reference-not-rendered@spec.template.spec.volumes[2].persistentVolumeClaim.claimName", "reference-not-rendered@spec.template.spec.volumes[3].projected.sources[0].secret.name",
				"reference-not-rendered@spec.template.spec.volumes[3].projected.sources[1].configMap.name"}},
		{"imagePullSecrets", "imagePullSecrets: [{name: registry-admin}]\ncontainers: [{name: app, image: nginx}]", []string{"reference-not-rendered@spec.template.spec.imagePullSecrets[0].name"}},
		{"serviceAccountName", "serviceAccountName: platform-operator\ncontainers: [{name: app, image: nginx}]", []string{"reference-not-rendered@spec.template.spec.serviceAccountName"}},
		{"deprecated serviceAccount", "serviceAccount: platform-operator\ncontainers: [{name: app, image: nginx}]", []string{"reference-not-rendered@spec.template.spec.serviceAccount"}},
		{"empty secret name", "containers: [{name: app, image: nginx}]\nvolumes: [{name: a, secret: {}}]", []string{"reference-not-rendered@spec.template.spec.volumes[0].secret.secretName"}},
		{"near-miss: platform objects and the default account", `serviceAccountName: default
imagePullSecrets: [{name: platform-pull}]
containers:
- name: app
  image: nginx
  env: [{name: CA, valueFrom: {configMapKeyRef: {name: platform-ca, key: ca.crt}}}]
  envFrom: [{secretRef: {name: event-bus-tls}}]
volumes:
- {name: media, persistentVolumeClaim: {claimName: platform-media}}
- {name: tls, projected: {sources: [{secret: {name: event-bus-tls}}]}}`, nil},
	},
}

// chartObjects are what the reference near-misses name and the chart renders.
const chartObjects = `
---
apiVersion: v1
kind: ConfigMap
metadata: {name: conf}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`

func TestPodClauses(t *testing.T) {
	wrappers := map[string]func(string) string{
		"Deployment": deployment,
		"Job":        func(s string) string { return job(s, false) },
		"hook Job":   func(s string) string { return job(s, true) },
	}
	for clause, cases := range podCases {
		t.Run(clause, func(t *testing.T) {
			for kind, wrap := range wrappers {
				t.Run(kind, func(t *testing.T) {
					var wrapped []clauseCase
					for _, tc := range cases {
						wrapped = append(wrapped, clauseCase{tc.name, wrap(tc.manifest) + chartObjects, tc.want})
					}
					runClause(t, wrapped)
				})
			}
		})
	}
}

func TestReferencesToRenderedObjects(t *testing.T) {
	runClause(t, []clauseCase{
		{"a ServiceAccount of the chart names a platform Secret", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\nimagePullSecrets: [{name: registry-admin}]\nsecrets: [{name: platform-admin-token}]",
			[]string{"reference-not-rendered@imagePullSecrets[0].name", "reference-not-rendered@secrets[0]"}},
		{"the account is rendered in another namespace", deployment("serviceAccountName: web\ncontainers: [{name: app, image: nginx}]") +
			"---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web, namespace: kube-system}",
			[]string{"namespace-not-allowed@metadata.namespace", "reference-not-rendered@spec.template.spec.serviceAccountName"}},
		{"the name is rendered as another kind", deployment("containers: [{name: app, image: nginx}]\nvolumes: [{name: a, secret: {secretName: conf}}]") + chartObjects,
			[]string{"reference-not-rendered@spec.template.spec.volumes[0].secret.secretName"}},
		{"near-miss: the chart renders the account and its pull secret", deployment("serviceAccountName: web\ncontainers: [{name: app, image: nginx}]") +
			"---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\nimagePullSecrets: [{name: creds}]" + chartObjects, nil},
	})
}

func TestDuplicateObjects(t *testing.T) {
	runClause(t, []clauseCase{
		{"two Secrets of one name", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: apps}",
			[]string{"duplicate-object@metadata.name"}},
		{"near-miss: a Secret and a ConfigMap of one name", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}", nil},
	})
}

func TestViolationNamesTheObject(t *testing.T) {
	got := Check(context.Background(), parse(t, deployment("hostNetwork: true\ncontainers: [{name: app, image: nginx}]")), testContext())
	want := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	if len(got) != 1 || got[0].Object != want {
		t.Fatalf("want one violation naming %+v, got %+v", want, got)
	}
	if !strings.Contains(got[0].Message, "remove") {
		t.Errorf("the message should say what to change: %q", got[0].Message)
	}
}

func TestCheckSpec(t *testing.T) {
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "tenant"}}
	if v := CheckSpec(a); len(v) != 0 {
		t.Errorf("a plain restricted Addon: %v", v)
	}
	a.Spec.TargetNamespace = "tenant"
	if v := CheckSpec(a); len(v) != 0 {
		t.Errorf("its own namespace as target: %v", v)
	}
	a.Spec.TargetNamespace, a.Spec.CreateNamespace = "kube-system", true
	a.Spec.Registration = &capstanv1.RegistrationSource{URL: "https://primary.example/addon.json"}
	v := CheckSpec(a)
	if len(v) != 3 || v[0].Rule != "target-namespace" || v[1].Rule != "create-namespace" || v[2].Rule != "registration-source" || v[0].Object.Name != "blog" {
		t.Errorf("CheckSpec = %+v; want target-namespace, create-namespace and registration-source on Addon blog", v)
	}
}

// TestCheckSpecDependencies: a restricted add-on depends only on add-ons
// of its own namespace, named with or without it.
func TestCheckSpecDependencies(t *testing.T) {
	cases := []struct {
		name string
		deps []capstanv1.DependencyReference
		want []string // the paths refused
	}{
		{"none", nil, nil},
		{"its own namespace, implied", []capstanv1.DependencyReference{{Name: "db"}}, nil},
		{"its own namespace, named", []capstanv1.DependencyReference{{Name: "db", Namespace: "tenant"}}, nil},
		{"the platform's namespace", []capstanv1.DependencyReference{{Name: "cert-manager", Namespace: "capstan-system"}},
			[]string{"spec.dependsOn[0].namespace"}},
		{"another tenant among its own", []capstanv1.DependencyReference{{Name: "db"}, {Name: "db", Namespace: "tenant-b"}, {Name: "cache", Namespace: "tenant"}},
			[]string{"spec.dependsOn[1].namespace"}},
	}
	for _, c := range cases {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "tenant"}}
		a.Spec.DependsOn = c.deps
		var got []string
		for _, v := range CheckSpec(a) {
			if v.Rule != "dependency-namespace" || v.Object.Name != "blog" {
				t.Errorf("%s: unexpected violation %+v", c.name, v)
				continue
			}
			if !strings.Contains(v.Message, "its own namespace, tenant:") || !strings.Contains(v.Message, "remove this entry from spec.dependsOn") {
				t.Errorf("%s: message %q; want it to name the add-on's own namespace and say what to change", c.name, v.Message)
			}
			got = append(got, v.Path)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: refused %v; want %v", c.name, got, c.want)
		}
	}
}

func TestCheckChart(t *testing.T) {
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "tenant"}}
	ok := ChartMetadata{APIVersion: "v2", Type: "application", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "true"}}
	if v := CheckChart(a, ok); len(v) != 0 {
		t.Errorf("a chart written for Capstan: %v", v)
	}
	v := CheckChart(a, ChartMetadata{APIVersion: "v1", Type: "library", Annotations: map[string]string{capstanv1.ChartAddonAnnotation: "yes"}})
	if len(v) != 3 || v[0].Rule != "chart-for-capstan" || v[1].Rule != "chart-api-version" || v[2].Rule != "chart-type" {
		t.Errorf("CheckChart = %+v; want chart-for-capstan, chart-api-version and chart-type", v)
	}
}

func TestProbeHostMessage(t *testing.T) {
	vs := Check(context.Background(), parse(t, deployment("containers: [{name: app, image: nginx, livenessProbe: {httpGet: {host: 169.254.169.254, port: 80}}}]")), testContext())
	if len(vs) != 1 {
		t.Fatalf("want one violation: %+v", vs)
	}
	for _, want := range []string{`container "app"`, "livenessProbe", "remove host", "the pod's own IP"} {
		if !strings.Contains(vs[0].Message, want) {
			t.Errorf("the message should say %q: %s", want, vs[0].Message)
		}
	}
}
