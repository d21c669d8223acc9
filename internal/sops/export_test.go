package sops

// SecretParts lets the external tests check what a decrypted value hides.
var SecretParts = secretParts
