package guard

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// checkJob applies the rules of a Job beyond its pod template: the
// cluster's own Job controller must run it. With spec.managedBy set to
// anything else, that controller leaves the Job alone, and the controller
// named may run it elsewhere (MultiKueue copies it to another cluster,
// past the platform's placement and sandbox), or none does and a hook
// waits out its timeout with no hint why.
func (ck *checker) checkJob(ref capstanv1.ObjectRef, j *batchv1.Job) {
	if m := j.Spec.ManagedBy; m != nil && *m != batchv1.JobControllerName {
		ck.add(ref, "spec.managedBy", RuleJobManagedBy,
			fmt.Sprintf("managedBy %q hands the Job to a controller other than the cluster's Job controller, which need not run it in this cluster nor keep the platform's rules; remove spec.managedBy or set it to %s", *m, batchv1.JobControllerName))
	}
}
