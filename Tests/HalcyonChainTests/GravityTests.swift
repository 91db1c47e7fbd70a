import HalcyonChain
import Testing

/// Gravity in the grammar: canonical identifiers (the default leaves an identifier as it was)
/// and the refusals.
@Suite struct GravityTests {
    @Test func identifiersAreCanonical() throws {
        func id(_ chain: String) throws -> String { try Chain.parse(chain).identifier }
        // The default gravity leaves the identifier as it was, so stored results keep their keys.
        #expect(try id("resize(320x320, mode=fill, gravity=center)") == "resize(320x320,mode=fill)")
        #expect(try id("resize(320x320, fill, attention)") == "resize(320x320,mode=fill,gravity=attention)")
        #expect(try id("resize(320x320, mode=fill, gravity=fp(0.30, .7))") == "resize(320x320,mode=fill,gravity=fp(0.3,0.7))")
        #expect(try id("crop(10x10, gravity=north)") == "crop(10x10,x=0.5,y=0)")
        #expect(try id("crop(10x10, gravity=entropy)") == "crop(10x10,gravity=entropy)")
    }

    @Test(arguments: [
        ("resize(10x10, mode=fill, gravity=middle)", "a gravity"),
        ("resize(10x10, mode=fill, gravity=fp(1.5,0.5))", "from 0 to 1"),
        ("resize(10x10, mode=fill, gravity=fp(0.5))", "fp(x,y)"),
        ("resize(10x10, mode=fill, gravity=fp(a,b))", "a number"),
        ("resize(10x10, gravity=north)", "only with mode=fill"),
        ("crop(10x10, x=0.2, gravity=entropy)", "either x and y or gravity"),
        ("crop(10x10, gravity=fp(0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9))", "at most 8"),
    ])
    func badGravitiesAreChainErrors(chain: String, expected: String) {
        #expect(Fixture.chainError(chain)?.contains(expected) == true, "\(Fixture.chainError(chain) ?? "no error")")
    }
}
