-- post.lua - wrk script: POST the JSON body in the file named by $BODY to the URL.
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = f:read("*a")
f:close()
