package controller

import (
	"testing"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestSameBranch: a sibling's folder is read at a sync's commit only when
// it reads the branch that sync read, of the same git repository.
func TestSameBranch(t *testing.T) {
	repo := func(url, spec, status string) *capstanv1.AddonRepository {
		return &capstanv1.AddonRepository{Spec: capstanv1.AddonRepositorySpec{URL: url, Branch: spec},
			Status: capstanv1.AddonRepositoryStatus{Branch: status}}
	}
	const u = "https://git.example.com/org/gitops.git"
	cases := []struct {
		name   string
		repo   *capstanv1.AddonRepository
		branch string
		other  *capstanv1.AddonRepository
		want   bool
	}{
		{"both the default", repo(u, "", ""), "main", repo(u, "", ""), true},
		{"the URL written otherwise", repo(u, "", ""), "main", repo("https://GIT.example.com/org/gitops/", "", ""), true},
		{"another repository", repo(u, "", ""), "main", repo("https://git.example.com/org/other.git", "", ""), false},
		{"the same branch named", repo(u, "main", ""), "main", repo(u, "main", ""), true},
		{"another branch", repo(u, "main", ""), "main", repo(u, "prod", ""), false},
		{"a default read as main", repo(u, "main", ""), "main", repo(u, "", "main"), true},
		{"a default never read", repo(u, "main", ""), "main", repo(u, "", ""), false},
		{"a branch against the default", repo(u, "", ""), "main", repo(u, "prod", ""), false},
	}
	for _, tc := range cases {
		if got := sameBranch(tc.repo, tc.branch, tc.other); got != tc.want {
			t.Errorf("%s: sameBranch = %v, want %v", tc.name, got, tc.want)
		}
	}
}
