package values

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlatformFromConfigMap(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: "capstan-system"}, Data: data}
	}
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		want    map[string]any
		wantErr string
	}{
		{name: "no ConfigMap: only the namespace", cm: nil, want: map[string]any{"namespace": "capstan-system"}},
		{name: "every known fact and an extra one", cm: cm(map[string]string{
			"hostname": "apps.example.com", "issuer": "letsencrypt", "pullSecrets": "regcred, mirror-cred,",
			"eventBusTLSSecret": "bus-tls", "mediaVolume": "media",
		}), want: map[string]any{
			"namespace": "capstan-system", "hostname": "apps.example.com", "issuer": "letsencrypt",
			"pullSecrets": []any{"regcred", "mirror-cred"}, "eventBusTLSSecret": "bus-tls", "mediaVolume": "media",
		}},
		{name: "empty facts are left out", cm: cm(map[string]string{"hostname": " "}), want: map[string]any{"namespace": "capstan-system"}},
		{name: "empty extra facts are left out", cm: cm(map[string]string{"mediaVolume": "", "storageClass": "  \n"}),
			want: map[string]any{"namespace": "capstan-system"}},
		{name: "an extra fact is kept as written", cm: cm(map[string]string{"caBundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"}),
			want: map[string]any{"namespace": "capstan-system", "caBundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"}},
		{name: "namespace is not the ConfigMap's to set", cm: cm(map[string]string{"namespace": "x"}), wantErr: "comes from the controller's configuration"},
		{name: "a key templates cannot read", cm: cm(map[string]string{"my.fact": "x"}), wantErr: "a fact's key must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlatformFromConfigMap(tt.cm, "capstan-system")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Values(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Values() = %#v, want %#v", got, tt.want)
			}
		})
	}
	if got := (Platform{Namespace: "ns", Extra: map[string]string{"mediaVolume": " "}}).Values(); !reflect.DeepEqual(got, map[string]any{"namespace": "ns"}) {
		t.Errorf("Values() of an empty extra fact = %#v, want it left out", got)
	}
	p, _ := PlatformFromConfigMap(cm(map[string]string{"pullSecrets": "b,a", "eventBusTLSSecret": "bus-tls"}), "x")
	if got := p.HandedOverSecrets(); !reflect.DeepEqual(got, []string{"a", "b", "bus-tls"}) {
		t.Fatalf("HandedOverSecrets = %v", got)
	}
}
