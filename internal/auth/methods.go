package auth

import "github.com/acphub/acphub/api"

// MethodRight is the right a client needs to send method: the schema's
// x-acphub-rights, where a method it does not list (an extension the hub
// forwards to the agent) needs its default.
func MethodRight(method string) Right {
	if r, ok := api.MethodRights[method]; ok {
		return Right(r)
	}
	return Right(api.DefaultRight)
}
