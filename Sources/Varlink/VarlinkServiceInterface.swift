/// `org.varlink.service`, which every Varlink service provides.
enum VarlinkServiceInterface {
    static let name = "org.varlink.service"

    static let text = """
        # Every Varlink service answers this interface: it says what the service is and
        # which interfaces it serves, and returns each interface's definition.
        interface org.varlink.service

        # What the service is, and the names of all the interfaces it serves.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # The definition of one served interface, comments included.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # No interface of that name is served here.
        error InterfaceNotFound (interface: string)

        # The interface has no method of that name.
        error MethodNotFound (method: string)

        # The interface declares the method but this service does not implement it.
        error MethodNotImplemented (method: string)

        # A parameter is missing, has the wrong type, or is out of range. parameter
        # names it, with its path where it is nested (posters.anyone, uids[2]);
        # reason says why ("expected a bool, got a string").
        error InvalidParameter (parameter: string, reason: ?string)

        # The caller is not allowed to call this method.
        error PermissionDenied ()

        # The method streams its replies; call it with "more".
        error ExpectedMore ()

        """

    static func make(
        info: VarlinkServiceInfo,
        interfaceNames: [String],
        description: @escaping @Sendable (String) -> String?
    ) -> VarlinkInterface {
        VarlinkInterface(
            text: self.text,
            methods: [
                "GetInfo": .immediate { _ in
                    [
                        "vendor": .string(info.vendor),
                        "product": .string(info.product),
                        "version": .string(info.version),
                        "url": .string(info.url),
                        "interfaces": .array(interfaceNames.map { .string($0) }),
                    ]
                },
                "GetInterfaceDescription": .immediate { request in
                    let name = try request.string("interface")
                    let text = name == self.name ? self.text : description(name)
                    guard let text else { throw VarlinkError.interfaceNotFound(name) }
                    return ["description": .string(text)]
                },
            ]
        )
    }
}
