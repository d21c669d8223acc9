package guard

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// liveSelectors is a fake selector lookup over fixed selectors, which
// counts its reads.
func liveSelectors(t *testing.T, reads *int, err error) SelectorsFunc {
	t.Helper()
	mustParse := func(s string) labels.Selector {
		sel, perr := labels.Parse(s)
		if perr != nil {
			t.Fatal(perr)
		}
		return sel
	}
	exprs, perr := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}},
	}})
	if perr != nil {
		t.Fatal(perr)
	}
	return func(_ context.Context, ns string) ([]Selector, error) {
		*reads++
		if ns != testNamespace {
			t.Errorf("selectors read in namespace %q; want the Addon's, %q", ns, testNamespace)
		}
		if err != nil {
			return nil, err
		}
		return []Selector{
			{Kind: "Service", Name: "platform-api", Selector: mustParse("app=platform-api")},
			{Kind: "NetworkPolicy", Name: "db-clients", Selector: exprs},
			{Kind: "PodDisruptionBudget", Name: "platform-web", Selector: mustParse("app.kubernetes.io/name=platform,app.kubernetes.io/component=web")},
			// A reader passes on no empty selector; the rule skips one too.
			{Kind: "NetworkPolicy", Name: "default-deny", Selector: labels.Everything()},
		}, nil
	}
}

// withTemplateLabels is a Deployment named web whose pod template carries
// labels (YAML flow map) and whose pod spec is podSpec.
func withTemplateLabels(lbls, podSpec string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: ` + lbls + `
    spec:
` + indent(podSpec, 6) + "\n"
}

func TestPodLabelsSelected(t *testing.T) {
	const containers = "containers: [{name: app, image: nginx}]"
	headless := "---\napiVersion: v1\nkind: Service\nmetadata: {name: web-headless}\nspec: {clusterIP: None, selector: {app: web}, ports: [{port: 80}]}\n"
	cases := []clauseCase{
		{"a platform Service's selector", withTemplateLabels("{app: platform-api}", containers),
			[]string{"pod-labels-selected@spec.template.metadata.labels"}},
		{"a platform Service's selector among other labels", withTemplateLabels("{app: platform-api, team: blog}", containers),
			[]string{"pod-labels-selected@spec.template.metadata.labels"}},
		{"a NetworkPolicy's set expression", withTemplateLabels("{app: web, tier: db}", containers),
			[]string{"pod-labels-selected@spec.template.metadata.labels"}},
		{"a PodDisruptionBudget's selector", withTemplateLabels("{app.kubernetes.io/name: platform, app.kubernetes.io/component: web}", containers),
			[]string{"pod-labels-selected@spec.template.metadata.labels"}},
		{"two selectors at once", withTemplateLabels("{app: platform-api, tier: cache}", containers),
			[]string{"pod-labels-selected@spec.template.metadata.labels", "pod-labels-selected@spec.template.metadata.labels"}},
		{"a Job's pod template", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\nspec:\n  template:\n    metadata: {labels: {app: platform-api}}\n    spec:\n      restartPolicy: Never\n" + indent(containers, 6) + "\n",
			[]string{"pod-labels-selected@spec.template.metadata.labels"}},
		{"the platform's own label", withTemplateLabels("{app: web, capstan.dev/platform: api}", containers),
			[]string{"pod-labels-selected@spec.template.metadata.labels[capstan.dev/platform]"}},
		{"a subdomain naming a Service the chart does not render", withTemplateLabels("{app: web}", "subdomain: postgres-headless\nhostname: postgres-0\n"+containers),
			[]string{"subdomain-not-rendered@spec.template.spec.subdomain"}},
		{"near-miss: a subdomain naming the chart's own headless Service", withTemplateLabels("{app: web}", "subdomain: web-headless\nhostname: web-0\n"+containers) + headless, nil},
		{"near-miss: a label value the selector does not name", withTemplateLabels("{app: platform-api-client}", containers), nil},
		{"near-miss: part of a PodDisruptionBudget's selector", withTemplateLabels("{app: web, app.kubernetes.io/name: platform}", containers), nil},
		{"near-miss: a set expression's other value", withTemplateLabels("{app: web, tier: frontend}", containers), nil},
		{"near-miss: the chart's own labels", withTemplateLabels("{app: web}", containers), nil},
	}
	reads := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testContext()
			c.Selectors = liveSelectors(t, &reads, nil)
			got := Check(context.Background(), parse(t, tc.manifest), c)
			if strings.Join(ruleKeys(got), " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q\n%s", ruleKeys(got), tc.want, messages(got))
			}
			for _, v := range got {
				if v.Rule == RulePodLabelsSelected && v.Path == "spec.template.metadata.labels" && !strings.Contains(v.Message, "does not own") {
					t.Errorf("the message does not say whose selector it is: %s", v.Message)
				}
			}
		})
	}
	t.Run("the message names the selecting object", func(t *testing.T) {
		c := testContext()
		c.Selectors = liveSelectors(t, &reads, nil)
		got := Check(context.Background(), parse(t, withTemplateLabels("{app: platform-api}", containers)), c)
		if len(got) != 1 || !strings.Contains(got[0].Message, `Service "platform-api"`) || !strings.Contains(got[0].Message, "app=platform-api") {
			t.Errorf("want one violation naming Service platform-api and its selector; got %s", messages(got))
		}
	})
}

func TestPodLabelsSelectedReadsOnceAndOnlyForPods(t *testing.T) {
	const containers = "containers: [{name: app, image: nginx}]"
	t.Run("once for every pod template", func(t *testing.T) {
		reads := 0
		c := testContext()
		c.Selectors = liveSelectors(t, &reads, nil)
		manifest := withTemplateLabels("{app: web}", containers) + "---\n" + job(containers, true)
		if got := Check(context.Background(), parse(t, manifest), c); len(got) != 0 {
			t.Fatalf("unexpected violations:\n%s", messages(got))
		}
		if reads != 1 {
			t.Errorf("selectors read %d times; want once per check", reads)
		}
	})
	t.Run("never for a render without pods", func(t *testing.T) {
		reads := 0
		c := testContext()
		c.Selectors = liveSelectors(t, &reads, nil)
		Check(context.Background(), parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf}\n"), c)
		if reads != 0 {
			t.Errorf("selectors read %d times for a render without pod templates; want none", reads)
		}
	})
	t.Run("a read that fails is ownership-unknown", func(t *testing.T) {
		reads := 0
		c := testContext()
		c.Selectors = liveSelectors(t, &reads, errors.New(`services is forbidden`))
		got := Check(context.Background(), parse(t, withTemplateLabels("{app: web}", containers)), c)
		if keys := ruleKeys(got); strings.Join(keys, " ") != "ownership-unknown@spec.template.metadata.labels" || !strings.Contains(got[0].Message, "forbidden") {
			t.Errorf("got %q; want ownership-unknown with the error\n%s", keys, messages(got))
		}
	})
	t.Run("CheckWithout does not read again", func(t *testing.T) {
		reads := 0
		c := testContext()
		c.Selectors = liveSelectors(t, &reads, nil)
		objs := parse(t, withTemplateLabels("{app: platform-api}", containers)+"---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
		refused := Check(context.Background(), objs, c)
		CheckWithout(context.Background(), objs, refused, c)
		if reads != 1 {
			t.Errorf("selectors read %d times; want once, by Check", reads)
		}
	})
}
