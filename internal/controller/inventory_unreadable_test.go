package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// TestAnUnreadableInventoryStopsOnlyItsAddon stores an installed Addon as a
// Capstan from before the one-string inventory left it: each entry four
// fields, written straight into etcd, where the API server would refuse it.
// The API server hands such entries back as {}. The controller must go on
// with every other Addon, and must neither apply, prune nor delete anything
// of this one until its inventory is cleared, as its message says.
func TestAnUnreadableInventoryStopsOnlyItsAddon(t *testing.T) {
	ns := newNamespace(t)
	id := ns[strings.LastIndex(ns, "-")+1:]
	url, _ := charts.publish(t, cmChart("1.0.0", "alpha", "beta"))
	old := create(t, newAddon(controllerNS, "oldinv-"+id, url, withTarget(ns),
		withSpec(func(s *capstanv1.AddonSpec) { s.DeletionPolicy = capstanv1.DeletionDelete; s.Prune = true })))
	waitPhase(t, old, capstanv1.PhaseSynced)

	storeFourFieldInventory(t, old)
	got := failedWith(t, old, "2 of 2 entries that name no object", "Nothing was applied, pruned or deleted", "kubectl patch addon "+old.Name)
	if !isStalled(got) {
		t.Errorf("the Addon is not Stalled: %s", describeStatus(got))
	}
	if bad := capstanv1.UnreadableEntries(got.Status.Inventory); len(bad) != 2 {
		t.Errorf("the inventory reads with the unreadable entries %q; want the 2 stored", bad)
	} else {
		t.Logf("the API server hands the entries back as %q", bad)
	}

	// The controller still reads the list of Addons: a new one installs.
	other := newNamespace(t)
	fresh := create(t, newAddon(controllerNS, "newinv-"+id, url, withTarget(other)))
	waitPhase(t, fresh, capstanv1.PhaseSynced)

	// A removal deletes nothing while the inventory cannot be read, and the
	// Addon stays, with the same message.
	if err := admin.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	failedWith(t, old, "2 of 2 entries that name no object")
	for _, name := range []string{"alpha", "beta"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Errorf("ConfigMap %s was deleted from an inventory that could not be read", name)
		}
	}

	// The way out the message gives: remove the inventory. The removal then
	// goes on, deletes what the inventory now names (nothing), and leaves
	// the software in place, unmanaged.
	clear := []byte(`[{"op":"remove","path":"/status/inventory"}]`)
	if err := admin.Status().Patch(context.Background(), getAddon(t, old), client.RawPatch(types.JSONPatchType, clear)); err != nil {
		t.Fatalf("removing the inventory, as the message says: %v", err)
	}
	eventually(t, 90*time.Second, "the Addon to go", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(old), &capstanv1.Addon{}))
	})
	for _, name := range []string{"alpha", "beta"} {
		if live(t, "v1", "ConfigMap", ns, name) == nil {
			t.Errorf("ConfigMap %s was deleted, though no inventory named it", name)
		}
	}

	// The other way out: remove the inventory of an Addon that stays. Its
	// next sync applies the add-on again and records what it applied.
	storeFourFieldInventory(t, fresh)
	failedWith(t, fresh, "2 of 2 entries that name no object")
	if err := admin.Status().Patch(context.Background(), getAddon(t, fresh), client.RawPatch(types.JSONPatchType, clear)); err != nil {
		t.Fatal(err)
	}
	update(t, fresh, func(a *capstanv1.Addon) { a.Annotations["test.capstan.dev/stored"] = "cleared" })
	back := synced(t, fresh)
	if ids := capstanv1.RefsOf(back.Status.Inventory); len(ids) != 2 || ids[0].Namespace != other {
		t.Errorf("after the sync the inventory is %v; want the two ConfigMaps in %s", ids, other)
	}
}

// storeFourFieldInventory rewrites the Addon in etcd with every inventory
// entry in the four-field form, and an annotation, so that the controller
// hears of the change.
func storeFourFieldInventory(t *testing.T, a *capstanv1.Addon) {
	t.Helper()
	key := "/registry/capstan.dev/addons/" + a.Namespace + "/" + a.Name
	var obj map[string]any
	if err := json.Unmarshal(etcdGet(t, key), &obj); err != nil {
		t.Fatal(err)
	}
	status, _ := obj["status"].(map[string]any)
	inventory, _ := status["inventory"].([]any)
	if len(inventory) == 0 {
		t.Fatalf("the stored Addon has no inventory: %v", status)
	}
	for i, entry := range inventory {
		var id capstanv1.ObjectID
		if err := id.UnmarshalText([]byte(entry.(string))); err != nil {
			t.Fatal(err)
		}
		inventory[i] = map[string]any{"apiVersion": id.APIVersion, "kind": id.Kind, "namespace": id.Namespace, "name": id.Name}
	}
	meta := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations["test.capstan.dev/stored"] = "four-field-inventory"
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	etcdPut(t, key, data)
}

// etcdGet reads one key through etcd's JSON gateway.
func etcdGet(t *testing.T, key string) []byte {
	t.Helper()
	var out struct {
		KVs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	etcdCall(t, "/v3/kv/range", map[string]any{"key": []byte(key)}, &out)
	if len(out.KVs) != 1 {
		t.Fatalf("etcd holds %d values at %s", len(out.KVs), key)
	}
	return out.KVs[0].Value
}

func etcdPut(t *testing.T, key string, value []byte) {
	t.Helper()
	etcdCall(t, "/v3/kv/put", map[string]any{"key": []byte(key), "value": value}, nil)
}

func etcdCall(t *testing.T, path string, req, out any) {
	t.Helper()
	body, _ := json.Marshal(req) // []byte is base64, as the gateway wants
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, cluster.EtcdURL+path, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s: %s", path, resp.Status, strings.TrimSpace(buf.String()))
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			t.Fatal(fmt.Errorf("etcd %s: %w", path, err))
		}
	}
}
