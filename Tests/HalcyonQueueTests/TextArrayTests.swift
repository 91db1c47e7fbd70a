import HalcyonQueue
import Testing

@Suite struct TextArrayTests {
    @Test func textArraysRoundTrip() {
        let items = ["http://a/b?c=1,2", "with \"quote\"", "back\\slash", ""]
        #expect(PGRows.parseTextArray(PGRows.textArrayLiteral(items)) == items)
        #expect(PGRows.parseTextArray("{}") == [])
        #expect(PGRows.parseTextArray("{a,b}") == ["a", "b"])
    }
}
