package controller_test

import (
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = capstanv1.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}

// jsonValues turns YAML into spec.values.
func jsonValues(y string) *apiextensionsv1.JSON {
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		panic(err)
	}
	var probe map[string]any
	if err := json.Unmarshal(j, &probe); err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: j}
}
